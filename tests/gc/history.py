"""A month of nightlies, simulated in time only: each night is the real `run_nightly` (load the
history, compile into the artifact store, host reference, baselines, lease, store the jobs
through `recorded_run`), its jobs measured for real on this host's CPU in this process.

What is simulated: the clock (each night's run and job times, and the times of the files the
night wrote or read, are set to that night), and the fleet: `HostFleet` runs each job on the host
agent in this process instead of through Ray (seven seconds of Ray start per night would make a
month of them the slowest test of the suite). A changed job's paired rounds are not run (their
baseline is still chosen, recorded and leased, which is what `farm gc` weighs).
"""

from __future__ import annotations

import dataclasses
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import FleetClient
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.fleet import JobEvent
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.nightly.run import NightlyResult, run_nightly
from ondevice_farm.nightly.suite import load_suite
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, load_profiles
from ondevice_farm.run_reader import iter_job_summaries
from ondevice_farm.store import ResultsStore
from ondevice_farm_agents.base import AgentSettings, DeviceUnit
from ondevice_farm_agents.registry import agent_class
from ondevice_farm_agents.repeats import run_repeats
from tests.compare.conftest import matmul_chain

DAY_S = 86400.0
SUITE = "gc-month"


class SimulatedClock:
    """`time` as the results store reads it, shifted into the past by `offset_s`."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def time(self) -> float:
        return time.time() + self.offset_s

    def gmtime(self, seconds: float | None = None) -> time.struct_time:
        return time.gmtime(self.time() if seconds is None else seconds)

    def strftime(self, fmt: str, when: time.struct_time | None = None) -> str:
        return time.strftime(fmt, when or self.gmtime())


@dataclass
class HostFleet(FleetClient):
    """This host's CPU unit, run in this process: the fleet `run_nightly` hands its jobs to."""

    clock: SimulatedClock = field(default_factory=SimulatedClock)
    settings: AgentSettings | None = None
    #: called as each job starts, with its spec (the lease test runs `farm gc` there)
    during_job: Callable[[JobSpec], None] | None = None

    def __post_init__(self) -> None:
        assert self.settings is not None
        self.agent = agent_class("host")(self.settings)
        self.unit: DeviceUnit = self.agent.discover()[0]

    def units(self) -> list[dict[str, Any]]:
        return [{"unit": self.unit, "up": True}]

    def run(
        self,
        specs: list[JobSpec],
        on_event: Callable[[JobEvent], None] | None = None,
        run_id: str | None = None,
        writing: Any = None,
        owned: bool = False,
        on_submitted: Callable[[], None] | None = None,
    ) -> Iterator[JobEvent]:
        # no Ray fleet to write the jobs: the events carry the runs, and the pipeline writes them
        if on_submitted is not None:
            on_submitted()
        for spec in specs:
            if self.during_job is not None:
                self.during_job(spec)
            request = dataclasses.replace(spec.request, paired=None)
            started = self.clock.time()
            self.agent.prepare(self.unit, request)
            run = run_repeats(self.agent, self.unit, request)
            yield JobEvent(
                spec.job_id, "done", unit=self.unit.name, run=run, queued_at=started, started_at=started,
                finished_at=self.clock.time(),
            )  # fmt: skip


@dataclass
class Month:
    home: FarmHome
    suite: Path
    fleet: HostFleet
    #: run id of each night, oldest first
    nights: list[str] = field(default_factory=list)
    #: each night's run document with its jobs' summaries as stored
    documents: list[dict[str, Any]] = field(default_factory=list)


def _backdate(root: Path, since_s: float, to_s: float) -> None:
    """Files the night wrote or read (times after `since_s`) get the night's time."""
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            info = os.lstat(path)
            # a folder's access time changes whenever it is listed: only what was written or read
            used = info.st_mtime if stat.S_ISDIR(info.st_mode) else max(info.st_mtime, info.st_atime)
            if used >= since_s:
                os.utime(path, (to_s, to_s), follow_symlinks=False)


def write_models(folder: Path, night: int, change_every: int) -> None:
    """`changing` gets new weights every `change_every` nights; `steady` never changes."""
    matmul_chain(folder / "changing.onnx", 2, width=32, seed=1 + night // change_every)
    if not (folder / "steady.onnx").exists():
        matmul_chain(folder / "steady.onnx", 2, width=32, seed=100)


@contextmanager
def simulated_farm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Month]:
    import ondevice_farm.nightly.run as nightly_run
    import ondevice_farm.store as store_module

    profiles = load_profiles(DEFAULT_PROFILES_DIR)
    settings = AgentSettings(profiles=profiles)
    clock = SimulatedClock()
    fleet = HostFleet(fleet=None, embedded=True, clock=clock, settings=settings)
    monkeypatch.setattr(store_module, "time", clock)

    @contextmanager
    def local_fleet(*args: Any, **kwargs: Any) -> Iterator[FleetClient]:
        yield fleet

    monkeypatch.setattr(nightly_run, "fleet_client", local_fleet)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: {SUITE}\ndevices: [host-cpu]\ntargets: [ort/cpu]\nruns: 5\nwarmup: 1\nrepeats: 1\n"
        "models:\n  - changing.onnx\n  - steady.onnx\n"
    )
    yield Month(FarmHome(tmp_path / "home"), suite, fleet)


def run_night(month: Month, night: int, nights_ago: float, change_every: int) -> dict[str, Any]:
    """Night `night`, `nights_ago` days before now."""
    write_models(month.suite.parent, night, change_every)
    month.fleet.clock.offset_s = -nights_ago * DAY_S
    began = time.time() - 1
    profiles = load_profiles(DEFAULT_PROFILES_DIR)
    assert month.fleet.settings is not None
    result = run_nightly(
        load_suite(month.suite),
        home=month.home,
        profiles=profiles,
        settings=month.fleet.settings,
        cluster=ClusterConfig(),
    )
    assert isinstance(result, NightlyResult)  # embedded: followed to its end
    _backdate(month.home.root, began, month.fleet.clock.time())
    # the night's result keeps counts, not jobs: the jobs as the store has them (summaries)
    with ResultsStore(month.home.store_path) as store:
        document = {**result.run, "jobs": list(iter_job_summaries(store, result.run["run_id"]))}
    month.nights.append(result.run["run_id"])
    month.documents.append(document)
    return document


def run_month(month: Month, nights: int = 30, change_every: int = 7) -> None:
    """`nights` nights, the last one yesterday."""
    for night in range(nights):
        run_night(month, night, nights - night, change_every)
    month.fleet.clock.offset_s = 0.0
