"""Where in the network a target's numbers leave the reference: the per-layer error curve.

For every compared intermediate tensor, in graph order, the error of the target's value against
the host reference's: max abs, relative error (||a - r|| / ||r||) and SNR. A layer *leaves
tolerance* when its SNR falls below the target's SNR floor (`ondevice_farm.analysis.numeric`), or when
it holds inf/NaN where the reference is finite. The first such layer is where drift starts.

Two ways to find it, and a curve says which it used:
- `all`: every layer captured in one run (the host; a budget no smaller than the layer count);
- `bisection`: `budget` layers sampled evenly in one run, then a binary search between the last
  sampled layer inside tolerance and the first outside it, one run per probe (log2 of the gap).
  It assumes that once a value has left tolerance the layers after it stay out, which holds for
  drift that accumulates; a layer that recovers inside the gap can hide an earlier start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ondevice_farm.analysis.numeric import MAX_SNR_DB

if TYPE_CHECKING:  # intermediates imports onnx (1-4 s): not for whoever only reads a curve
    from ondevice_farm.analysis.intermediates import LayerPoint

#: layers captured in one run before the search switches to bisection
DEFAULT_LAYER_BUDGET = 512

Probe = Callable[[list[str]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class LayerError:
    point: LayerPoint
    max_abs: float | None
    rel_err: float | None
    #: None where the target's value is not finite (JSON has no infinity)
    snr_db: float | None
    #: inf/NaN in the target's value where the reference is finite
    nonfinite: int
    diverged: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.point.tensor,
            "node": self.point.node,
            "op_type": self.point.op_type,
            "depth": self.point.depth,
            "max_abs": self.max_abs,
            "rel_err": self.rel_err,
            "snr_db": self.snr_db,
            "nonfinite": self.nonfinite,
            "diverged": self.diverged,
        }


@dataclass
class DivergenceCurve:
    """One job's per-layer errors. `source` says how the target's values were obtained:
    `measured` (the target's own runtime on this host), `predicted` (a host simulation)."""

    label: str
    target: str
    precision: str | None
    source: str
    method: str
    runs: int
    snr_floor_db: float
    layers: list[LayerError] = field(default_factory=list)
    first: LayerError | None = None
    backend: str | None = None
    note: str = ""

    @property
    def lowest(self) -> LayerError | None:
        finite = [layer for layer in self.layers if layer.snr_db is not None]
        return min(finite, key=lambda layer: layer.snr_db or 0.0) if finite else None

    def shown(self, rows: int) -> list[LayerError]:
        """`rows` layers worth showing, in graph order: around the first divergent one, else the
        lowest-SNR ones and the last."""
        layers = self.layers
        if self.first is not None:
            at = next((i for i, layer in enumerate(layers) if layer.point == self.first.point), 0)
            start = max(0, at - rows // 2)
            return layers[start : start + rows]
        ranked = sorted(range(len(layers)), key=lambda i: layers[i].snr_db or 0.0)[: rows - 1]
        picked = set(ranked) | ({len(layers) - 1} if layers else set())
        return [layers[i] for i in sorted(picked)]

    @property
    def growth_db(self) -> float | None:
        """How many dB the SNR fell from the first divergent layer to the last layer compared."""
        if self.first is None or self.first.snr_db is None or not self.layers:
            return None
        last = self.layers[-1].snr_db
        return None if last is None else self.first.snr_db - last

    def finding(self) -> str:
        if self.first is None:
            text = f"every compared layer stays within tolerance ({self.snr_floor_db:g} dB)"
            lowest = self.lowest
            if lowest is not None and lowest.snr_db is not None:
                text += f"; lowest {lowest.snr_db:.1f} dB at {lowest.point.node} ({lowest.point.op_type})"
            return text
        first = self.first
        where = f"{first.point.node} ({first.point.op_type})"
        computed = ""
        if self.precision or self.backend:
            computed = (
                ", computed in " + (self.precision or "?") + (f" on {self.backend}" if self.backend else "")
            )
        if first.nonfinite:
            start = f"{first.nonfinite} non-finite value(s) appear"
        else:
            start = f"SNR drops to {first.snr_db:.1f} dB"
        growth = self.growth_db
        tail = ""
        if growth is not None and growth > 0.05:
            tail = f", grows {growth:.0f} dB by the output"
        elif self.layers[-1].snr_db is None:
            tail = ", and the output is not finite"
        return f"drift starts at {where} on {self.target}{computed}: {start}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "target": self.target,
            "precision": self.precision,
            "source": self.source,
            "method": self.method,
            "runs": self.runs,
            "snr_floor_db": self.snr_floor_db,
            "backend": self.backend,
            "first_divergent": None if self.first is None else self.first.to_dict(),
            "growth_db": self.growth_db,
            "finding": self.finding(),
            "note": self.note,
            "layers": [layer.to_dict() for layer in self.layers],
        }


def layer_error(
    point: LayerPoint, reference: np.ndarray, actual: np.ndarray, snr_floor_db: float
) -> LayerError:
    ref = np.asarray(reference, dtype=np.float64).ravel()
    got = np.asarray(actual, dtype=np.float64).ravel()
    finite_ref = np.isfinite(ref)
    nonfinite = int(np.count_nonzero(finite_ref & ~np.isfinite(got)))
    if nonfinite:
        return LayerError(point, None, None, None, nonfinite, diverged=True)
    ref, got = ref[finite_ref], got[finite_ref]
    err = got - ref
    signal, noise = float(np.dot(ref, ref)), float(np.dot(err, err))
    if noise == 0.0:
        snr = MAX_SNR_DB
    elif signal == 0.0:
        snr = -MAX_SNR_DB
    else:
        snr = max(-MAX_SNR_DB, min(MAX_SNR_DB, 10.0 * math.log10(signal / noise)))
    rel = math.sqrt(noise / signal) if signal else (0.0 if noise == 0.0 else math.inf)
    max_abs = float(np.abs(err).max()) if err.size else 0.0
    return LayerError(
        point, max_abs, rel if math.isfinite(rel) else None, snr, 0, diverged=snr < snr_floor_db
    )


def compare_layers(
    points: Sequence[LayerPoint],
    reference: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    snr_floor_db: float,
) -> list[LayerError]:
    """Errors of the layers both sides produced with the same shape, in graph order."""
    errors = []
    for point in points:
        ref, got = reference.get(point.tensor), actual.get(point.tensor)
        if ref is None or got is None or np.shape(ref) != np.shape(got):
            continue
        errors.append(layer_error(point, ref, got, snr_floor_db))
    return errors


def _sample(points: Sequence[LayerPoint], budget: int) -> list[int]:
    if len(points) <= budget:
        return list(range(len(points)))
    step = (len(points) - 1) / max(1, budget - 1)
    return sorted({round(i * step) for i in range(budget)})


Measure = Callable[[list["LayerPoint"]], list["LayerError"]]


def find_divergence(
    points: Sequence[LayerPoint],
    reference: dict[str, np.ndarray],
    probe: Probe,
    snr_floor_db: float,
    *,
    budget: int = DEFAULT_LAYER_BUDGET,
) -> tuple[list[LayerError], LayerError | None, str, int]:
    """(curve, first divergent layer, method, runs of the target) for a target reached through
    `probe` (tensor names -> the target's values for them, one run per call)."""

    def measure(chosen: list[LayerPoint]) -> list[LayerError]:
        return compare_layers(chosen, reference, probe([p.tensor for p in chosen]), snr_floor_db)

    return search_divergence(points, measure, budget=budget)


def search_divergence(
    points: Sequence[LayerPoint], measure: Measure, *, budget: int = DEFAULT_LAYER_BUDGET
) -> tuple[list[LayerError], LayerError | None, str, int]:
    """The search behind `find_divergence`, for a target that reports each layer's error itself
    (`measure`: the layers asked for -> their errors, one run of the target per call)."""
    if budget < 2:
        raise ValueError("a layer budget below 2 cannot bracket a divergence")
    chosen = _sample(points, budget)
    curve = measure([points[i] for i in chosen])
    runs = 1
    first = next((layer for layer in curve if layer.diverged), None)
    if len(chosen) == len(points) or first is None:
        return curve, first, "all" if len(chosen) == len(points) else "sampled", runs
    index_of = {p.tensor: i for i, p in enumerate(points)}
    high = index_of[first.point.tensor]
    earlier = [index_of[layer.point.tensor] for layer in curve if index_of[layer.point.tensor] < high]
    low = max(earlier) if earlier else -1
    while high - low > 1:
        middle = (low + high) // 2
        errors = measure([points[middle]])
        runs += 1
        if errors and errors[0].diverged:
            high, first = middle, errors[0]
        else:
            # a layer the target does not produce (fused away) counts as still inside tolerance
            low = middle
    if first is not None and all(layer.point != first.point for layer in curve):
        curve = sorted([*curve, first], key=lambda layer: index_of[layer.point.tensor])
    return curve, first, "bisection", runs
