"""`run_suite`: one night of a suite (`farm nightly SUITE`), its jobs stored and compared with the
suite's history; the verdict per (model, device, target) as values. Tonight's jobs stay in the
store (`load_run(night.run_id)` reads them whole): a night may be thousands of jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ondevice_farm.progress import Progress
from ondevice_farm.python_api.notebook import LineProgress, figure, html_table
from ondevice_farm.python_api.place import Farm
from ondevice_farm.python_api.values import frozen


@dataclass(frozen=True)
class Verdict:
    """One (model, device, target) of tonight against its history (docs/fleet.md's regression test)."""

    model: str
    device: str
    target: str
    #: compared | failed | new | missing | no-baseline
    status: str
    verdict: str
    regression: bool
    p50_ms: float | None
    #: why it was not compared, where it was not
    reason: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Verdict:
        return cls(
            model=str(row["model"]),
            device=str(row["device"]),
            target=str(row["target"]),
            status=str(row["status"]),
            verdict=str(row["verdict"]),
            regression=bool(row["regression"]),
            p50_ms=row.get("p50"),
            reason=row.get("reason"),
        )


@dataclass(frozen=True)
class Night:
    run_id: str
    suite: str
    status: str
    baseline_run: str | None
    verdicts: tuple[Verdict, ...]
    document: MappingProxyType[str, Any] = field(repr=False, compare=False)

    @property
    def regressions(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.regression)

    def _repr_html_(self) -> str:
        rows = [
            [v.model, v.device, v.target, v.verdict, figure(v.p50_ms, 3), v.reason or ""]
            for v in self.verdicts
        ]
        title = (
            f"nightly {self.suite} run {self.run_id} ({self.status}): {len(self.regressions)} regression(s)"
        )
        return html_table(title, ["model", "device", "target", "verdict", "p50 ms", "why not compared"], rows)


def run_suite(
    suite: str | Path,
    *,
    baseline: str | None = None,
    allow_simulated: bool = False,
    farm: Farm | None = None,
    address: str | None = None,
    progress: Progress | None = None,
) -> Night:
    """`farm nightly SUITE` from Python: the night, then its verdicts against the suite's latest
    complete run (or `baseline`). With a controller's address the night is the controller's:
    interrupting stops following it, and it goes on there (docs/fleet.md)."""
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.nightly.run import HandedOver, run_nightly
    from ondevice_farm.nightly.suite import load_suite, refuse_simulated
    from ondevice_farm_agents.simulated.agent import PROFILE
    from ondevice_farm_agents.simulated.profile import is_simulated

    place = (farm or Farm()).with_address(address)
    loaded = load_suite(Path(suite))
    profiles, settings = place.fleet()
    refuse_simulated(loaded, {PROFILE} | {n for n, p in profiles.items() if is_simulated(p)}, allow_simulated)
    result = run_nightly(
        loaded,
        home=place.farm_home,
        profiles=profiles,
        settings=settings,
        cluster=ClusterConfig(address=place.address),
        baseline=baseline,
        progress=progress or LineProgress(),
        store_location=place.store_location,
    )
    assert not isinstance(result, HandedOver)  # only `detach` hands a night over
    comparison = result.comparison.to_dict()
    return Night(
        run_id=str(result.run["run_id"]),
        suite=str(result.run["suite"]),
        status=str(result.run["status"]),
        baseline_run=comparison["baseline_run"],
        verdicts=tuple(Verdict.of(j) for j in comparison["jobs"]),
        document=frozen({"run": result.run, "comparison": comparison}),
    )
