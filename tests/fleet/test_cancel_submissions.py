"""A submission to a running controller that is cancelled or abandoned stops its job on the unit.

`farm serve` (embedded Ray on loopback, this host's host-cpu unit, a 4 s submitter timeout) and
`farm submit --address` of a job with a ten-minute sustained phase, as a user runs them. The
submitter then ends two ways: SIGTERM (handled as Ctrl-C: it cancels its submission) and
`kill -9` (no word: the controller notices the silence once the submitter timeout passes). Either
way the unit's DeviceActor stops working within a bounded time (its CPU time stops growing, the
unit is idle again), no session process is left, and the run is marked interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from ondevice_farm_agents.host.agent import SESSION_SCRIPT
from tests.fleet.cluster import descendants_running, kill_tree
from tests.fleet.conftest import only_loopback, wait_for
from tests.fleet.serve import FARM, clean_env, farm_serve

#: long enough that a job stopped early (by anything but the timeout) is told apart from one the
#: timeout stopped: the controller counts a submitter alive until its last long-poll (1 s) ends and
#: looks once per health period (1 s), so the timeout stops a job 4 to 6 s after the kill
SUBMITTER_TIMEOUT_S = 4.0
#: from the cancel to the unit's actor idle: the terminate flag ends the inference in flight at
#: once; the rest is Ray's calls and, abandoned, the timeout plus one health period of the fleet
STOPPED_WITHIN_S = 15.0
#: the DeviceActors' CPU is sampled in windows this short after a kill: the job worked until at
#: least the start of the last window in which they used more than BUSY_SHARE of a core
BUSY_WINDOW_S = 0.2
BUSY_SHARE = 0.3
#: idle this long after working: the job has stopped
IDLE_FOR_S = 1.0
#: how much earlier than the timeout the last busy window may start: one window, and the delays of
#: sampling on a loaded two-core machine
TIMEOUT_MARGIN_S = 0.5

pytestmark = pytest.mark.slow


@dataclass
class Served:
    process: subprocess.Popen[str]
    address: str
    home: Path
    farm_home: Path
    api_url: str

    def actors(self) -> list[psutil.Process]:
        """The DeviceActors below this controller (its embedded Ray's workers)."""
        found = []
        for child in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if "DeviceActor" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.NoSuchProcess:
                pass
        return found

    def actor_cpu_s(self, over_s: float = 1.0) -> float:
        """CPU seconds the DeviceActors used over the next `over_s` seconds."""

        def total() -> float:
            spent = 0.0
            for actor in self.actors():
                try:
                    times = actor.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                spent += times.user + times.system
            return spent

        first = total()
        time.sleep(over_s)
        return total() - first

    def worked_on_s(self, since: float) -> float:
        """Seconds from `since` to the start of the last short window in which the DeviceActors
        worked (a lower bound of when the job stopped), sampled until they stay idle IDLE_FOR_S."""
        last_busy = since
        idle_since: float | None = None
        while time.monotonic() < since + STOPPED_WITHIN_S:
            began = time.monotonic()
            if self.actor_cpu_s(BUSY_WINDOW_S) > BUSY_SHARE * BUSY_WINDOW_S:
                last_busy, idle_since = began, None
            else:
                idle_since = began if idle_since is None else idle_since
                if time.monotonic() - idle_since >= IDLE_FOR_S:
                    break
        return last_busy - since

    def session_processes(self) -> set[int]:
        return descendants_running(self.process.pid, SESSION_SCRIPT)

    def run_status(self, run_id: str) -> str | None:
        with sqlite3.connect(self.farm_home / "results.sqlite") as db:
            row = db.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def latest_run(self) -> tuple[str, str] | None:
        path = self.farm_home / "results.sqlite"
        if not path.exists():
            return None
        try:
            with sqlite3.connect(path) as db:
                newest = "SELECT run_id, status FROM runs ORDER BY created_at DESC LIMIT 1"
                row = db.execute(newest).fetchone()
        except sqlite3.OperationalError:  # the store is being created: no table yet
            return None
        return None if row is None else (str(row[0]), str(row[1]))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    root = tmp_path_factory.mktemp("cancel")
    home = root / "user"
    home.mkdir()
    with farm_serve(home, root / "head", "--submitter-timeout", str(SUBMITTER_TIMEOUT_S)) as serving:
        state = Served(serving.process, serving.address, home, root / "head", serving.api_url)
        wait_for(lambda: state.actors(), 60, "the host-cpu unit's DeviceActor")
        yield state


def start_long_submit(
    served: Served, farm_home: Path, model: Path, via: str = "ray"
) -> tuple[subprocess.Popen[str], str]:
    """A `farm submit --address` (`via` Ray, or the submit API) whose job runs ten minutes;
    returned once the unit works on it."""
    address = served.address if via == "ray" else served.api_url
    process = subprocess.Popen(
        [FARM, "submit", str(model), "--devices", "host-cpu", "--runs", "3", "--no-profile",
         "--sustained", "10m", "--address", address, "--json"],
        env=clean_env(served.home, farm_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: (served.latest_run() or ("", ""))[1] == "running", 120, "the run to start")
        run = served.latest_run()
        assert run is not None
        wait_for(lambda: served.actor_cpu_s() > 0.3, 60, "the DeviceActor to run the job")
    except BaseException:
        kill_tree(process.pid)
        raise
    assert process.poll() is None, process.communicate()[1][-2000:]
    return process, run[0]


def assert_stopped(served: Served, run_id: str, since: float) -> float:
    """Wait for the unit's actor to go idle and the run to read interrupted; seconds it took."""
    wait_for(lambda: served.actor_cpu_s() < 0.1, STOPPED_WITHIN_S, "the DeviceActor to stop the job")
    took_s = time.monotonic() - since
    wait_for(lambda: served.run_status(run_id) == "interrupted", 30, "the run marked interrupted")
    assert not served.session_processes()
    assert served.actors(), "the unit's actor itself must stay, for the next job"
    return took_s


@pytest.mark.parametrize("via", ["ray", "api"])
def test_sigterm_of_a_submitter_stops_its_running_job_on_the_unit(
    served: Served, tmp_path: Path, tiny_model: Path, via: str
) -> None:
    process, run_id = start_long_submit(served, tmp_path / "submitter", tiny_model, via)
    try:
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        kill_tree(process.pid)
    assert process.returncode == 130, stderr[-2000:]
    took_s = assert_stopped(served, run_id, began)
    print(f"SIGTERM ({via}): the unit stopped the job {took_s:.2f} s after the signal")


def test_kill_9_of_a_submitter_stops_its_job_once_the_submitter_timeout_passes(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    process, run_id = start_long_submit(served, tmp_path / "submitter", tiny_model)
    try:
        os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        process.wait(timeout=10)
        # nobody told the unit: it works on for a dead submitter until the controller's timeout
        worked_on_s = served.worked_on_s(killed)
    finally:
        kill_tree(process.pid)
    took_s = assert_stopped(served, run_id, killed)
    assert worked_on_s >= SUBMITTER_TIMEOUT_S - TIMEOUT_MARGIN_S, (
        f"the job stopped {worked_on_s:.2f} s after the kill, before the {SUBMITTER_TIMEOUT_S} s timeout"
    )
    print(f"kill -9: the unit worked on {worked_on_s:.2f} s, idle {took_s:.2f} s after the submitter died")


def test_kill_9_of_an_api_submitter_stops_its_job_when_its_connection_drops(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    """Over the submit API the controller need not wait for the submitter timeout: the dropped
    connection says the submitter is gone."""
    process, run_id = start_long_submit(served, tmp_path / "submitter", tiny_model, "api")
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        began = time.monotonic()
    finally:
        kill_tree(process.pid)
    took_s = assert_stopped(served, run_id, began)
    print(f"kill -9 (api): the unit stopped the job {took_s:.2f} s after the submitter died")

    # the unit takes the next submission's job
    done = subprocess.run(
        [FARM, "submit", str(tiny_model), "--devices", "host-cpu", "--runs", "3", "--no-profile",
         "--address", served.address, "--json"],
        env=clean_env(served.home, tmp_path / "next"),
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "complete"
