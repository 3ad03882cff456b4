"""How far a device's outputs are from the host reference, and whether that is acceptable."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from farm.targets import Target

#: SNR above this is reported as this: identical outputs have infinite SNR, JSON has no infinity
MAX_SNR_DB = 200.0


@dataclass(frozen=True)
class Tolerance:
    """A device output passes when its SNR and cosine to the reference are at least these."""

    snr_db_min: float
    cosine_min: float


#: fp32 CPU kernels differ from the reference in summation order only; fp16 and quantised
#: backends are judged by what they can reach (fp16 carries ~11 bits: ~60 dB at best)
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "ort/cpu": Tolerance(snr_db_min=80.0, cosine_min=0.99999),
    "ort/xnnpack": Tolerance(snr_db_min=60.0, cosine_min=0.9999),
    "ort/cuda": Tolerance(snr_db_min=40.0, cosine_min=0.999),
    "ort/nnapi": Tolerance(snr_db_min=30.0, cosine_min=0.999),
    "ort/qnn": Tolerance(snr_db_min=15.0, cosine_min=0.98),
    "coreml/all": Tolerance(snr_db_min=30.0, cosine_min=0.999),
    "coreml/ane": Tolerance(snr_db_min=30.0, cosine_min=0.999),
    "coreml/gpu": Tolerance(snr_db_min=30.0, cosine_min=0.999),
    "coreml/cpu": Tolerance(snr_db_min=30.0, cosine_min=0.999),
}


def default_tolerance(target: Target) -> Tolerance:
    return DEFAULT_TOLERANCES.get(target.name, Tolerance(snr_db_min=30.0, cosine_min=0.999))


@dataclass(frozen=True)
class OutputDiff:
    max_abs: float
    mean_abs: float
    rmse: float
    cosine: float
    snr_db: float
    shape_matches: bool = True

    def passes(self, tolerance: Tolerance) -> bool:
        return (
            self.shape_matches and self.snr_db >= tolerance.snr_db_min and self.cosine >= tolerance.cosine_min
        )


def diff_output(reference: np.ndarray, actual: np.ndarray) -> OutputDiff:
    if reference.shape != actual.shape:
        nan = float("nan")
        return OutputDiff(nan, nan, nan, nan, nan, shape_matches=False)
    ref = reference.astype(np.float64).ravel()
    got = actual.astype(np.float64).ravel()
    if ref.size == 0:
        return OutputDiff(0.0, 0.0, 0.0, 1.0, MAX_SNR_DB)
    err = got - ref
    abs_err = np.abs(err)
    signal = float(np.dot(ref, ref))
    noise = float(np.dot(err, err))
    if noise == 0.0:
        snr = MAX_SNR_DB
    elif signal == 0.0:
        snr = -MAX_SNR_DB
    else:
        snr = min(MAX_SNR_DB, 10.0 * math.log10(signal / noise))
    norms = float(np.linalg.norm(ref) * np.linalg.norm(got))
    # two all-zero outputs agree perfectly; one all-zero output does not agree at all
    cosine = float(np.dot(ref, got) / norms) if norms else (1.0 if noise == 0.0 else 0.0)
    return OutputDiff(
        max_abs=float(abs_err.max()),
        mean_abs=float(abs_err.mean()),
        rmse=float(math.sqrt(noise / ref.size)),
        cosine=cosine,
        snr_db=snr,
    )


@dataclass(frozen=True)
class ReferenceCheck:
    outputs: dict[str, OutputDiff]
    tolerance: Tolerance
    missing: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.missing and all(d.passes(self.tolerance) for d in self.outputs.values())


def compare_outputs(
    reference: dict[str, np.ndarray], actual: dict[str, np.ndarray], tolerance: Tolerance
) -> ReferenceCheck:
    diffs = {name: diff_output(ref, actual[name]) for name, ref in reference.items() if name in actual}
    missing = tuple(name for name in reference if name not in actual)
    return ReferenceCheck(outputs=diffs, tolerance=tolerance, missing=missing)
