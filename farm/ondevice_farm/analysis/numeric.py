"""How far a device's outputs are from the reference, and whether that is acceptable.

Each output is judged by metrics that fit its dtype (docs/results.md, "Reference check"):
floating outputs by error, SNR, cosine and an allclose criterion, with non-finite values
counted on both sides; integer and bool outputs by exact match; strings by equality. Nothing
here raises on the values it is given: an inf or NaN is a failed verdict, never an exception.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ondevice_farm.analysis.tolerance import DEFAULT_TOLERANCES, Tolerance, default_tolerance

__all__ = [
    "MAX_SNR_DB",
    "OutputDiff",
    "ReferenceCheck",
    "Tolerance",
    "compare_outputs",
    "default_tolerance",
    "diff_output",
]

#: SNR above this is reported as this: identical outputs have infinite SNR, JSON has no infinity
MAX_SNR_DB = 200.0
NAN = float("nan")

FLOAT, INTEGER, BOOL, STRING = "float", "integer", "bool", "string"


def output_kind(dtype: np.dtype[Any]) -> str:
    if dtype.kind in "fc":
        return FLOAT
    if dtype.kind in "iu":
        return INTEGER
    if dtype.kind == "b":
        return BOOL
    return STRING


@dataclass(frozen=True)
class OutputDiff:
    """One output against its reference. Metrics that do not apply to the output's kind, or
    cannot be computed (a shape mismatch, an all-zero reference for SNR), are NaN."""

    max_abs: float
    mean_abs: float
    rmse: float
    cosine: float
    snr_db: float
    shape_matches: bool = True
    kind: str = FLOAT
    dtype: str = ""
    actual_dtype: str = ""
    shape: tuple[int, ...] = ()
    actual_shape: tuple[int, ...] = ()
    elements: int = 0
    #: {"nan": n, "inf": n} in the reference and on the device
    nonfinite_reference: dict[str, int] = field(default_factory=lambda: {"nan": 0, "inf": 0})
    nonfinite_actual: dict[str, int] = field(default_factory=lambda: {"nan": 0, "inf": 0})
    #: float: elements outside atol + rtol*|ref| (at the tolerance it was computed with)
    outside: int = 0
    #: integer, bool, string: elements that differ
    mismatches: int = 0

    @property
    def nonfinite(self) -> bool:
        return sum(self.nonfinite_reference.values()) + sum(self.nonfinite_actual.values()) > 0

    @property
    def exact_match(self) -> float:
        return 1.0 if self.elements == 0 else 1.0 - self.mismatches / self.elements

    @property
    def outside_fraction(self) -> float:
        return 0.0 if self.elements == 0 else self.outside / self.elements

    def failure(self, tolerance: Tolerance) -> str | None:
        """Why this output fails `tolerance` (one phrase, no output name), or None if it passes."""
        if not self.shape_matches:
            return f"shape {list(self.actual_shape)} on the device, {list(self.shape)} in the reference"
        if (
            self.dtype
            and self.actual_dtype
            and (_kind_of(self.dtype) == STRING) != (_kind_of(self.actual_dtype) == STRING)
        ):
            return f"{self.dtype} in the reference, {self.actual_dtype} on the device"
        if self.nonfinite:
            return _nonfinite_text(self)
        if self.kind != FLOAT:
            if self.exact_match >= tolerance.min_exact_match:
                return None
            what = "strings" if self.kind == STRING else "values"
            largest = "" if math.isnan(self.max_abs) else f", largest difference {self.max_abs:g}"
            rate, needed = _percent(self.exact_match), _percent(tolerance.min_exact_match)
            count = f"{self.mismatches} of {self.elements} {what} differ"
            return f"{count} (exact match {rate}, needs {needed}){largest}"
        allclose_ok = self.outside_fraction <= tolerance.max_outside_fraction
        energy_ok = (
            math.isfinite(self.snr_db)
            and self.snr_db >= tolerance.snr_db_min
            and math.isfinite(self.cosine)
            and self.cosine >= tolerance.cosine_min
        )
        if allclose_ok or energy_ok:
            return None
        snr = "undefined" if math.isnan(self.snr_db) else f"{self.snr_db:.1f} dB"
        cosine = "undefined" if math.isnan(self.cosine) else f"{self.cosine:.6f}"
        return (
            f"{self.outside} of {self.elements} elements outside atol {tolerance.atol:g} + rtol "
            f"{tolerance.rtol:g}*|ref| (max |err| {self.max_abs:.3g}), and SNR {snr} / cosine {cosine} "
            f"below {tolerance.snr_db_min:g} dB / {tolerance.cosine_min:g}"
        )

    def passes(self, tolerance: Tolerance) -> bool:
        return self.failure(tolerance) is None


def _kind_of(dtype: str) -> str:
    try:
        return output_kind(np.dtype(dtype))
    except TypeError:
        return STRING


def _nonfinite_text(diff: OutputDiff) -> str:
    def side(counts: dict[str, int]) -> str:
        total = counts["nan"] + counts["inf"]
        return f"{total} ({counts['inf']} inf, {counts['nan']} NaN)" if total else "0"

    return (
        f"non-finite values: {side(diff.nonfinite_actual)} of {diff.elements} on the device, "
        f"{side(diff.nonfinite_reference)} in the reference"
    )


def _nonfinite_counts(values: np.ndarray) -> dict[str, int]:
    return {"nan": int(np.isnan(values).sum()), "inf": int(np.isinf(values).sum())}


def _float_diff(ref: np.ndarray, got: np.ndarray, tolerance: Tolerance, base: dict[str, Any]) -> OutputDiff:
    ref_bad, got_bad = _nonfinite_counts(ref), _nonfinite_counts(got)
    finite = np.isfinite(ref) & np.isfinite(got)
    all_finite = bool(finite.all())
    r, g = ref[finite], got[finite]
    err = g - r
    abs_err = np.abs(err)
    # allclose, counting a non-finite element on either side as outside
    outside = int((abs_err > tolerance.atol + tolerance.rtol * np.abs(r)).sum()) + int((~finite).sum())
    if r.size == 0:
        return OutputDiff(NAN, NAN, NAN, NAN, NAN, outside=outside, **base)
    noise = float(np.dot(err, err))
    snr, cosine = NAN, NAN
    if all_finite:
        signal = float(np.dot(r, r))
        if noise == 0.0:
            snr = MAX_SNR_DB
        elif signal > 0.0:
            snr = min(MAX_SNR_DB, 10.0 * math.log10(signal / noise))
        norms = float(np.linalg.norm(r) * np.linalg.norm(g))
        # two all-zero outputs agree; with one all-zero side the angle is undefined
        cosine = float(np.dot(r, g) / norms) if norms else (1.0 if noise == 0.0 else NAN)
    return OutputDiff(
        max_abs=float(abs_err.max()),
        mean_abs=float(abs_err.mean()),
        rmse=math.sqrt(noise / r.size),
        cosine=cosine,
        snr_db=snr,
        nonfinite_reference=ref_bad,
        nonfinite_actual=got_bad,
        outside=outside,
        **base,
    )


def _exact_diff(reference: np.ndarray, actual: np.ndarray, kind: str, base: dict[str, Any]) -> OutputDiff:
    max_abs = mean_abs = NAN
    if kind == STRING:
        equal = reference.astype(str) == actual.astype(str)
    elif actual.dtype.kind in "biu":
        ref, got = reference.astype(np.int64), actual.astype(np.int64)
        equal = ref == got
        if kind == INTEGER and ref.size:
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            max_abs, mean_abs = float(diff.max()), float(diff.mean())
    else:
        # an integer output a runtime returned as floats: equal only where the value is exact
        got_f = actual.astype(np.float64)
        equal = reference.astype(np.float64) == got_f
        return _with_nonfinite(reference, got_f, equal, kind, base)
    return OutputDiff(max_abs, mean_abs, NAN, NAN, NAN, mismatches=int((~equal).sum()), **base)


def _with_nonfinite(
    reference: np.ndarray, got: np.ndarray, equal: np.ndarray, kind: str, base: dict[str, Any]
) -> OutputDiff:
    finite = np.isfinite(got)
    diff = np.abs(got[finite] - reference.astype(np.float64)[finite])
    return OutputDiff(
        float(diff.max()) if diff.size and kind == INTEGER else NAN,
        float(diff.mean()) if diff.size and kind == INTEGER else NAN,
        NAN,
        NAN,
        NAN,
        nonfinite_actual=_nonfinite_counts(got),
        mismatches=int((~equal).sum()),
        **base,
    )


def diff_output(reference: np.ndarray, actual: np.ndarray, tolerance: Tolerance | None = None) -> OutputDiff:
    """The metrics of one output; `tolerance` sets the allclose bounds (fp32 defaults if None)."""
    tolerance = tolerance or DEFAULT_TOLERANCES["fp32"]
    reference, actual = np.asarray(reference), np.asarray(actual)
    kind = output_kind(reference.dtype)
    base: dict[str, Any] = {
        "kind": kind,
        "dtype": str(reference.dtype),
        "actual_dtype": str(actual.dtype),
        "shape": tuple(int(d) for d in reference.shape),
        "actual_shape": tuple(int(d) for d in actual.shape),
        "elements": int(reference.size),
    }
    if reference.shape != actual.shape:
        return OutputDiff(NAN, NAN, NAN, NAN, NAN, shape_matches=False, **base)
    actual_kind = output_kind(actual.dtype)
    if STRING in (kind, actual_kind) and kind != actual_kind:
        # nothing numeric to compare: every element differs
        return OutputDiff(NAN, NAN, NAN, NAN, NAN, mismatches=int(reference.size), **base)
    with np.errstate(all="ignore"):
        if kind == FLOAT:
            return _float_diff(
                reference.astype(np.float64).ravel(), actual.astype(np.float64).ravel(), tolerance, base
            )
        return _exact_diff(reference.ravel(), actual.ravel(), kind, base)


@dataclass(frozen=True)
class ReferenceCheck:
    """Every output's diff and the verdict: passed, failed, or not_compared (with the reason)."""

    outputs: dict[str, OutputDiff]
    tolerance: Tolerance
    missing: tuple[str, ...] = ()
    not_compared_reason: str | None = None

    @property
    def failures(self) -> list[str]:
        """One line per failing output, naming it."""
        lines = [f"{name}: {why}" for name, d in self.outputs.items() if (why := d.failure(self.tolerance))]
        lines += [f"{name}: missing from the device's outputs" for name in self.missing]
        return lines

    @property
    def passed(self) -> bool:
        return self.not_compared_reason is None and not self.failures

    @property
    def state(self) -> str:
        if self.not_compared_reason is not None:
            return "not_compared"
        return "passed" if self.passed else "failed"


def compare_outputs(
    reference: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    tolerance: Tolerance,
    *,
    no_outputs_reason: str = "the runner returned no outputs",
) -> ReferenceCheck:
    """A device that returned no outputs at all is `not_compared`, never failed: nothing was
    measured against the reference (a percentiles-only runner, a dump that could not be read)."""
    if not actual:
        return ReferenceCheck({}, tolerance, not_compared_reason=no_outputs_reason)
    if not reference:
        return ReferenceCheck({}, tolerance, not_compared_reason="the reference has no outputs")
    diffs = {
        name: diff_output(ref, actual[name], tolerance) for name, ref in reference.items() if name in actual
    }
    missing = tuple(name for name in reference if name not in actual)
    return ReferenceCheck(outputs=diffs, tolerance=tolerance, missing=missing)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.6g} %"
