"""How close a device's outputs must be to the reference: defaults by what the target computes
in, overridden per run (`--tolerance`) or per suite (`tolerance:`). docs/results.md states them.

Syntax of an override (the same on the command line and in a suite), one or more of:

    [PRECISION:]KEY=VALUE[,KEY=VALUE...]

KEY is `atol`, `rtol`, `outside` (fraction of elements allowed outside atol + rtol*|ref|),
`snr_db`, `cosine` or `exact` (fraction of integer/bool/string elements that must be equal);
`snr_db_min` and `cosine_min` are accepted for `snr_db` and `cosine`. Without a PRECISION the
keys apply to every job; `fp16:atol=1e-2` only to jobs judged at fp16 (also `fp32`, `int8`).
Keys not named keep the default for the job's precision.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ondevice_farm.errors import UsageError
from ondevice_farm.runtimes.registry import runtime_spec
from ondevice_farm.targets import Target

#: the tolerance classes: what a target's arithmetic rounds to
PRECISIONS = ("fp32", "fp16", "int8")


@dataclass(frozen=True)
class Tolerance:
    """A floating output passes when every value is finite and either all but `max_outside_fraction`
    of its elements lie within `atol + rtol*|ref|`, or its SNR and cosine reach their minimum.
    An integer, bool or string output passes when at least `min_exact_match` of it is equal."""

    snr_db_min: float
    cosine_min: float
    atol: float = 1e-5
    rtol: float = 1e-4
    max_outside_fraction: float = 0.0
    min_exact_match: float = 1.0
    #: the class the defaults came from (fp32, fp16, int8)
    precision: str = "fp32"
    #: what the target computes in, where that differs from the class (tf32 is judged as fp16)
    computed_in: str = "fp32"
    #: default | --tolerance | suite
    source: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: fp32 kernels differ from the reference in summation order only (about 1e-7 relative);
#: fp16 keeps 11 significant bits (~66 dB for one rounding, less through a deep graph); int8
#: rounds to 256 levels per tensor (a good quantisation keeps 20-40 dB against the float model)
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(snr_db_min=80.0, cosine_min=0.99999, atol=1e-5, rtol=1e-4, precision="fp32"),
    "fp16": Tolerance(snr_db_min=30.0, cosine_min=0.999, atol=1e-3, rtol=1e-2, precision="fp16"),
    "int8": Tolerance(snr_db_min=20.0, cosine_min=0.99, atol=1e-2, rtol=5e-2, precision="int8"),
}

#: coarsest last: the tolerance follows the coarsest of the target's arithmetic and the graph's
_RANK = {"fp32": 0, "tf32": 1, "fp16": 2, "mixed": 2, "int8": 3}
_CLASS = {"fp32": "fp32", "tf32": "fp16", "fp16": "fp16", "mixed": "fp16", "int8": "int8"}


def computed_precision(target: Target, graph_precision: str | None) -> str:
    """The coarsest of what the target computes in and what the compiled graph holds."""
    # what the backend computes an fp32 graph in (its RuntimeSpec); a CoreML target's ML Program
    # holds its precision in the graph (fp16 unless --coreml-precision fp32)
    spec = runtime_spec(target.runtime)
    target_side = (
        spec.backend(target.backend).computes_fp32_in
        if spec is not None and target.backend in spec.backend_names
        else "fp32"
    )
    graph_side = graph_precision if graph_precision in _RANK else "fp32"
    return max(target_side, graph_side, key=lambda p: _RANK[p])


def default_tolerance(target: Target, graph_precision: str | None = None) -> Tolerance:
    computed = computed_precision(target, graph_precision)
    return replace(DEFAULT_TOLERANCES[_CLASS[computed]], computed_in=computed)


KEYS: dict[str, str] = {
    "atol": "atol",
    "rtol": "rtol",
    "outside": "max_outside_fraction",
    "snr_db": "snr_db_min",
    "snr_db_min": "snr_db_min",
    "cosine": "cosine_min",
    "cosine_min": "cosine_min",
    "exact": "min_exact_match",
}
_FRACTIONS = {"max_outside_fraction", "min_exact_match", "cosine_min"}


@dataclass(frozen=True)
class ToleranceOverrides:
    """Fields to replace in the defaults: for every precision (key None) or for one."""

    fields: dict[str | None, dict[str, float]] = field(default_factory=dict)
    source: str = "--tolerance"

    def __bool__(self) -> bool:
        return any(self.fields.values())

    def apply(self, tolerance: Tolerance) -> Tolerance:
        changes = {**self.fields.get(None, {}), **self.fields.get(tolerance.precision, {})}
        if not changes:
            return tolerance
        return replace(tolerance, source=self.source, **changes)  # type: ignore[arg-type]

    def merged(self, other: ToleranceOverrides) -> ToleranceOverrides:
        """`other` on top of these (a model's suite entry over the suite's own)."""
        keys = set(self.fields) | set(other.fields)
        fields = {k: {**self.fields.get(k, {}), **other.fields.get(k, {})} for k in keys}
        return ToleranceOverrides(fields, other.source if other else self.source)

    def to_texts(self) -> list[str]:
        names = {v: k for k, v in KEYS.items() if not k.endswith("_min")}
        return [
            (f"{precision}:" if precision else "") + ",".join(f"{names[k]}={v:g}" for k, v in values.items())
            for precision, values in self.fields.items()
            if values
        ]


def _value(part: str, key: str, text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{where} {part!r}: {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UsageError(f"{where} {part!r}: the value must be finite")
    if key != "snr_db_min" and value < 0:
        raise UsageError(f"{where} {part!r}: the value cannot be negative")
    if key in _FRACTIONS and value > 1:
        raise UsageError(f"{where} {part!r}: a fraction is at most 1")
    return value


def parse_tolerance(
    texts: list[str] | tuple[str, ...], where: str = "--tolerance", source: str = "--tolerance"
) -> ToleranceOverrides:
    """`["atol=1e-4,rtol=1e-3", "int8:snr_db=15"]` -> overrides; a readable UsageError otherwise."""
    fields: dict[str | None, dict[str, float]] = {}
    for text in texts:
        head, colon, body = text.partition(":")
        precision: str | None = None
        if colon and "=" not in head:
            precision = head.strip()
            if precision not in PRECISIONS:
                known = ", ".join(PRECISIONS)
                raise UsageError(f"{where} {text!r}: unknown precision {precision!r} (use {known})")
        else:
            body = text
        for part in (p.strip() for p in body.split(",")):
            if not part:
                continue
            name, equals, value = part.partition("=")
            key = KEYS.get(name.strip())
            if key is None or not equals:
                raise UsageError(
                    f"{where} {part!r}: use [PRECISION:]KEY=VALUE with KEY one of {', '.join(sorted(KEYS))}"
                )
            fields.setdefault(precision, {})[key] = _value(part, key, value.strip(), where)
    return ToleranceOverrides(fields, source)
