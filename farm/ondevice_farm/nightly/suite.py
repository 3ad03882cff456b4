"""A nightly suite: which models run on which devices and targets, how many runs, what counts
as a regression. YAML, validated on load with errors that name the file and the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ondevice_farm.analysis.regression import RegressionPolicy
from ondevice_farm.analysis.tolerance import ToleranceOverrides, parse_tolerance
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_SUITE_REPEATS,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.durations import parse_duration_s
from ondevice_farm.errors import UsageError
from ondevice_farm.generate.spec import GenerateSpec, parse_generate
from ondevice_farm.targets import Target


@dataclass(frozen=True)
class SuiteModel:
    path: Path
    devices: tuple[str, ...]
    targets: tuple[Target, ...] | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    #: the model whose host outputs are the reference (`reference:`), e.g. the float model
    reference: Path | None = None
    #: `tolerance:` of the suite, with the model's own on top
    tolerance: ToleranceOverrides = field(default_factory=ToleranceOverrides)
    #: seconds of sustained load after the timed runs (0: none)
    sustained_s: float = 0.0
    #: measurement sessions per job: the unit of the regression test
    repeats: int = DEFAULT_SUITE_REPEATS
    #: a generation job on an ONNX Runtime GenAI folder (`generate: prompt=64,decode=32`)
    generate: GenerateSpec | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    models: tuple[SuiteModel, ...]
    attempts: int = DEFAULT_MAX_ATTEMPTS
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S
    policy: RegressionPolicy = field(default_factory=RegressionPolicy)
    source: Path | None = None
    #: `allow_simulated: true`: the suite may run on simulated units (`refuse_simulated`)
    allow_simulated: bool = False
    #: `units_interchangeable: true`: a job pinned to a unit (`pixel8:*`) whose unit is lost runs
    #: on another unit of its profile; false: it is reported lost, with the unit's reason
    units_interchangeable: bool = False


SUITE_FIELDS = {
    "name",
    "models",
    "devices",
    "targets",
    "runs",
    "warmup",
    "sustained",
    "repeats",
    "attempts",
    "placement_deadline_s",
    "regression",
    "tolerance",
    "allow_simulated",
    "units_interchangeable",
}
MODEL_FIELDS = {
    "path",
    "devices",
    "targets",
    "shapes",
    "runs",
    "warmup",
    "reference",
    "tolerance",
    "sustained",
    "repeats",
    "generate",
}
POLICY_FIELDS = {
    "alpha",
    "min_effect",
    "confidence",
    "bootstrap",
    "snr_drop_db",
    "between_run_z",
    "paired_max_rounds",
    "paired_budget_s",
}
#: the regression policy's integer fields, and the least each may be
INTEGER_POLICY_FIELDS = {"bootstrap": 0, "paired_max_rounds": 1}


def _check_keys(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{where}: unknown field '{unknown[0]}' (known: {', '.join(sorted(known))})")


def _number(value: Any, where: str, kind: type = int, minimum: float = 0) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (kind is int and not isinstance(value, int))
    ):
        raise UsageError(f"{where} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    if value < minimum:
        raise UsageError(f"{where} must be at least {minimum}, got {value}")
    return kind(value)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{where} must be a non-empty list of names")
    return tuple(value)


def _targets(value: Any, where: str) -> tuple[Target, ...] | None:
    if value is None:
        return None
    try:
        return tuple(Target.parse(t) for t in _strings(value, where))
    except (ValueError, UsageError) as exc:
        raise UsageError(f"{where}: {exc}") from None


def _tolerance(value: Any, where: str) -> ToleranceOverrides:
    """A suite's `tolerance:`: the `--tolerance` syntax, one string or a list of them."""
    if value is None:
        return ToleranceOverrides(source="suite")
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise UsageError(f"{where} must be a string like 'atol=1e-4,rtol=1e-3' or a list of them")
    return parse_tolerance(texts, where=where, source="suite")


def _model(data: Any, index: int, defaults: dict[str, Any], base: Path, where: str) -> SuiteModel:
    here = f"{where}: models[{index}]"
    if isinstance(data, str):
        data = {"path": data}
    if not isinstance(data, dict) or "path" not in data:
        raise UsageError(f"{here} must be a path or a mapping with 'path'")
    _check_keys(data, MODEL_FIELDS, here)
    path = Path(str(data["path"]))
    merged = {**defaults, **{k: v for k, v in data.items() if k != "path"}}
    if "devices" not in merged:
        raise UsageError(f"{here}: no devices (give 'devices' for the suite or the model)")
    shapes_raw = merged.get("shapes") or {}
    if not isinstance(shapes_raw, dict):
        raise UsageError(f"{here}.shapes must map input names to shapes like [1, 3, 224, 224]")
    shapes = {
        str(k): tuple(_number(d, f"{here}.shapes.{k}", int, 1) for d in v) for k, v in shapes_raw.items()
    }
    reference = data.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise UsageError(f"{here}.reference must be the path of a model")
    suite_tolerance = _tolerance(defaults.get("tolerance"), f"{where}: tolerance")
    reference_path = None if reference is None else Path(reference)
    return SuiteModel(
        reference=None
        if reference_path is None
        else (reference_path if reference_path.is_absolute() else base / reference_path),
        tolerance=suite_tolerance.merged(_tolerance(data.get("tolerance"), f"{here}.tolerance")),
        path=path if path.is_absolute() else (base / path),
        devices=_strings(merged["devices"], f"{here}.devices"),
        targets=_targets(merged.get("targets"), f"{here}.targets"),
        shapes=shapes,
        runs=_number(merged.get("runs", DEFAULT_TIMED_RUNS), f"{here}.runs", int, 1),
        warmup=_number(merged.get("warmup", DEFAULT_WARMUP_RUNS), f"{here}.warmup", int, 0),
        sustained_s=parse_duration_s(merged["sustained"], f"{here}.sustained")
        if "sustained" in merged
        else 0.0,
        repeats=_number(merged.get("repeats", DEFAULT_SUITE_REPEATS), f"{here}.repeats", int, 1),
        generate=_generate(data.get("generate"), f"{here}.generate"),
    )


def _generate(value: Any, where: str) -> GenerateSpec | None:
    """`generate: prompt=64,decode=32[,depth=...]`, as `farm submit --generate` takes it."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{where} must be a spec like 'prompt=64,decode=32' (docs/generate.md)")
    try:
        return parse_generate(value)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc.message}", hint=exc.hint) from None


def parse_suite(data: Any, path: Path) -> Suite:
    where = str(path)
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a suite must be a mapping (name, models, devices, ...)")
    _check_keys(data, SUITE_FIELDS, where)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}: missing 'name' (the suite's name: runs are compared within a suite)")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise UsageError(f"{where}: 'models' must be a non-empty list")
    defaults = {
        k: data[k]
        for k in ("devices", "targets", "runs", "warmup", "tolerance", "sustained", "repeats")
        if k in data
    }
    policy_raw = data.get("regression") or {}
    if not isinstance(policy_raw, dict):
        raise UsageError(f"{where}: 'regression' must be a mapping")
    _check_keys(policy_raw, POLICY_FIELDS, f"{where}: regression")
    policy = RegressionPolicy(
        **{
            k: _number(
                v,
                f"{where}: regression.{k}",
                int if k in INTEGER_POLICY_FIELDS else float,
                INTEGER_POLICY_FIELDS.get(k, 0),
            )
            for k, v in policy_raw.items()
        }
    )
    flags = {key: data.get(key, False) for key in ("allow_simulated", "units_interchangeable")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise UsageError(f"{where}: {key} must be true or false, got {value!r}")
    return Suite(
        allow_simulated=flags["allow_simulated"],
        units_interchangeable=flags["units_interchangeable"],
        name=name.strip(),
        models=tuple(_model(m, i, defaults, path.parent, where) for i, m in enumerate(models)),
        attempts=_number(data.get("attempts", DEFAULT_MAX_ATTEMPTS), f"{where}: attempts", int, 1),
        placement_deadline_s=_number(
            data.get("placement_deadline_s", DEFAULT_PLACEMENT_DEADLINE_S),
            f"{where}: placement_deadline_s",
            float,
            0,
        ),
        policy=policy,
        source=path,
    )


def refuse_simulated(suite: Suite, simulated: set[str], allowed: bool = False) -> None:
    """A nightly's runs become the suite's history and baselines: one on simulated units (profiles
    `simulated`; `all` where they are loaded) runs only when asked for, by `--allow-simulated` or
    the suite's `allow_simulated: true`, so synthetic figures never become a real suite's baseline
    by accident. Its figures stay marked synthetic either way."""
    if allowed or suite.allow_simulated:
        return
    for model in suite.models:
        for device in model.devices:
            profile = device.partition(":")[0].strip()
            if profile in simulated or (profile == "all" and simulated):
                raise UsageError(
                    f"suite {suite.name!r} runs on simulated units ({device}), whose figures are synthetic",
                    hint="pass `farm nightly --allow-simulated` (or `allow_simulated: true` in the suite)",
                )


def load_suite(path: Path) -> Suite:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such suite file") from None
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: cannot read the suite ({str(exc).splitlines()[0]})") from None
    return parse_suite(data, path)
