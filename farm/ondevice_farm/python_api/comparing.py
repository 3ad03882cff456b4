"""`compare`: is B slower than A on each device and target? The one compare path: `farm compare`
calls `compare_document` with its parsed request; Python calls `compare` and gets a `Comparison`.

The verdict is the farm's sequential paired test (docs/compare.md: interleaved A/B rounds, the
ratio of medians with a Student-t interval on log ratios, alpha spent over the looks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ondevice_farm.analysis.paired import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from ondevice_farm.api.wire import is_api_address
from ondevice_farm.config import DEFAULT_SEED, DEFAULT_TIMED_RUNS, DEFAULT_WARMUP_RUNS
from ondevice_farm.controller.compare import (
    DEFAULT_BUDGET_S,
    DEFAULT_COMPARE_THREADS,
    DEFAULT_MAX_ROUNDS,
    CompareRequest,
)
from ondevice_farm.errors import UsageError
from ondevice_farm.progress import Progress
from ondevice_farm.python_api.notebook import LineProgress, figure, html_table
from ondevice_farm.python_api.place import Farm
from ondevice_farm.python_api.submitting import ModelLike, model_file, shape_texts
from ondevice_farm.python_api.values import frozen


@dataclass(frozen=True)
class Pair:
    """One device and target: B against A."""

    device: str
    target: str
    status: str
    #: `same`, `slower`, `faster` or `inconclusive` (`failed` when the pair did not run)
    verdict: str
    #: B/A of the medians, and its interval at the compare's alpha
    ratio: float | None
    interval: tuple[float, float] | None
    rounds: int
    error: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Pair:
        interval = row.get("interval")
        return cls(
            device=str(row.get("requested") or row.get("device", "")),
            target=str(row.get("target", "")),
            status=str(row.get("status", "")),
            verdict=str(row.get("verdict") or "failed"),
            ratio=float(row["ratio"]) if isinstance(row.get("ratio"), int | float) else None,
            interval=(float(interval[0]), float(interval[1])) if interval else None,
            rounds=int(row.get("rounds") or 0),
            error=row.get("error"),
        )

    def evidence(self) -> str:
        """`slower: B/A 1.21 [1.12, 1.31] after 40 rounds`: what the verdict rests on."""
        if self.ratio is None or self.interval is None:
            return f"{self.verdict}: {self.error or 'no ratio'}"
        low, high = self.interval
        return f"{self.verdict}: B/A {self.ratio:.3f} [{low:.3f}, {high:.3f}] after {self.rounds} rounds"


@dataclass(frozen=True)
class Comparison:
    baseline: str
    candidate: str
    pairs: tuple[Pair, ...]
    document: MappingProxyType[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, document: dict[str, Any]) -> Comparison:
        settings = document.get("settings") or {}
        return cls(
            baseline=str(settings.get("baseline") or document.get("baseline", {}).get("name", "A")),
            candidate=str(settings.get("candidate") or document.get("candidate", {}).get("name", "B")),
            pairs=tuple(Pair.of(c) for c in document.get("comparisons") or ()),
            document=frozen(document),
        )

    @property
    def slower(self) -> tuple[Pair, ...]:
        return tuple(p for p in self.pairs if p.verdict == "slower")

    def pair(self, device: str, target: str) -> Pair:
        for pair in self.pairs:
            if pair.device == device and pair.target == target:
                return pair
        raise KeyError(f"no pair of {device} {target} in this comparison")

    def _repr_html_(self) -> str:
        """The verdict per device and target, as a notebook shows it."""
        rows = [
            [
                pair.device,
                pair.target,
                pair.verdict,
                figure(pair.ratio, 3),
                "-" if pair.interval is None else f"[{pair.interval[0]:.3f}, {pair.interval[1]:.3f}]",
                str(pair.rounds),
                pair.error or "",
            ]
            for pair in self.pairs
        ]
        head = ["device", "target", "verdict", "B/A", "interval", "rounds", "error"]
        return html_table(f"{self.baseline} vs {self.candidate}", head, rows)


def compare(
    baseline: ModelLike,
    candidate: ModelLike,
    *,
    devices: str | Sequence[str] = "host-cpu",
    targets: str | Sequence[str] | None = None,
    runs: int = DEFAULT_TIMED_RUNS,
    warmup: int = DEFAULT_WARMUP_RUNS,
    shapes: Mapping[str, Sequence[int]] | Sequence[str] = (),
    inputs: str | Path | None = None,
    seed: int = DEFAULT_SEED,
    threads: int | None = DEFAULT_COMPARE_THREADS,
    pin: str = "auto",
    spinning: bool | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_ALPHA,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    budget: str | float = DEFAULT_BUDGET_S,
    order_seed: int | None = None,
    generate: str | None = None,
    farm: Farm | None = None,
    address: str | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """`farm compare BASE CANDIDATE` from Python: models (paths, `ModelProto`s, exported
    programs) or `run:RUN_ID`, with `farm compare`'s options and defaults (`threads=None`: the
    runtime's choice; `spinning=None`: ORT's default; `budget`: seconds, or "90s", "10m")."""
    place = (farm or Farm()).with_address(address)
    with model_file(baseline) as path_a, model_file(candidate) as path_b:
        request = compare_request(
            _source(baseline, path_a),
            _source(candidate, path_b),
            devices=devices if isinstance(devices, str) else ",".join(devices),
            targets=None if targets is None else targets if isinstance(targets, str) else ",".join(targets),
            runs=runs,
            warmup=warmup,
            shapes=shape_texts(shapes),
            inputs_npz=None if inputs is None else Path(inputs),
            seed=seed,
            threads=threads,
            pin=pin,
            spinning=spinning,
            min_effect=min_effect,
            alpha=alpha,
            max_rounds=max_rounds,
            budget=budget,
            order_seed=order_seed,
            generate=generate,
        )
        return Comparison.of(compare_document(request, place, progress or LineProgress()))


def _source(given: ModelLike, path: Path) -> str:
    """A `run:RUN_ID` stays as it is; anything else is the model file's path."""
    return given if isinstance(given, str) and given.startswith("run:") else str(path)


def compare_request(
    baseline: str,
    candidate: str,
    *,
    devices: str,
    targets: str | None,
    runs: int,
    warmup: int,
    shapes: tuple[str, ...],
    inputs_npz: Path | None,
    seed: int,
    threads: int | None,
    pin: str,
    spinning: bool | None,
    min_effect: float,
    alpha: float,
    max_rounds: int,
    budget: str | float,
    order_seed: int | None,
    generate: str | None,
) -> CompareRequest:
    """The checked request, from options as `farm compare` takes them (UsageError on a bad one)."""
    from ondevice_farm.controller.compare import parse_affinity
    from ondevice_farm.durations import parse_duration_s
    from ondevice_farm.generate.spec import parse_generate
    from ondevice_farm.inputs import parse_shapes
    from ondevice_farm.targets import parse_targets

    if threads is not None and threads < 1:
        raise UsageError(f"--threads {threads}: expected a positive count or `default`")
    return CompareRequest(
        baseline=baseline,
        candidate=candidate,
        devices=devices,
        targets=parse_targets(targets),
        runs=runs,
        warmup=warmup,
        shapes=parse_shapes(shapes),
        inputs_npz=inputs_npz,
        seed=seed,
        intra_op_threads=threads,
        cpu_affinity=parse_affinity(pin),
        allow_spinning=spinning,
        alpha=alpha,
        min_effect=min_effect,
        max_rounds=max_rounds,
        budget_s=float(budget) if isinstance(budget, int | float) else parse_duration_s(budget, "--budget"),
        order_seed=order_seed,
        generate=None if generate is None else parse_generate(generate),
    )


def compare_document(request: CompareRequest, farm: Farm, progress: Progress) -> dict[str, Any]:
    """The compare's document (docs/compare.md), run where `farm` says (a controller's Ray
    address, or an embedded local Ray)."""
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.controller.compare import run_compare

    if is_api_address(farm.address):
        raise UsageError(
            "farm compare reaches a controller through Ray, not its submit API",
            hint="pass the controller's Ray address, HOST:PORT",
        )
    profiles, settings = farm.fleet()
    return run_compare(
        request,
        home=farm.farm_home,
        profiles=profiles,
        settings=settings,
        cluster=ClusterConfig(address=farm.address),
        store_location=farm.store_location,
        progress=progress,
    )
