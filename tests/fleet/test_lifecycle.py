"""An embedded submitter's end: SIGTERM as Ctrl-C, and kill -9 leaving no process behind.

Processes are counted by pid: the submitter's descendants (its embedded Ray's GCS, raylet,
workers, the DeviceActor running the job), sampled while the job runs, must all be gone within
the watchdog's bound after the submitter dies.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.fleet.cluster import alive, kill_tree
from tests.fleet.conftest import only_loopback, wait_for

FARM = str(Path(sys.executable).parent / "farm")
#: the watchdog polls every 0.5 s; Ray's own processes take a moment to die once signalled
GONE_WITHIN_S = 10.0

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _loopback_only() -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")


def start_long_submit(home: Path, model: Path) -> tuple[subprocess.Popen[str], set[int]]:
    """An embedded `farm submit` whose one job runs for minutes; returns it once the job runs,
    with every descendant seen meanwhile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "FARM_"))}
    env.update(FARM_SIMULATED_DEVICES="1", FARM_AGENT_SIMULATED_LATENCY_MS="5")
    process = subprocess.Popen(
        [FARM, "--home", str(home), "submit", str(model), "--devices", "simulated", "--runs", "100000"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: set[int] = set()

    def job_running() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"farm submit exited: {process.communicate(timeout=30)[1][-2000:]}")
        with_actor = False
        try:
            children = psutil.Process(process.pid).children(recursive=True)
        except psutil.NoSuchProcess:  # exited since the poll: the next call says how
            return False
        for child in children:
            seen.add(child.pid)
            try:
                title = " ".join(child.cmdline())
            except psutil.NoSuchProcess:  # a worker that ended, or a zombie not yet reaped (a subclass)
                continue
            with_actor = with_actor or "DeviceActor" in title
        return with_actor and running_runs(home) == 1

    try:
        wait_for(job_running, 120, "the job to run on the embedded DeviceActor", interval_s=0.5)
        time.sleep(1.0)
        job_running()  # the last workers Ray started
    except BaseException:
        kill_tree(process.pid)
        raise
    return process, seen


def running_runs(home: Path) -> int:
    path = home / "results.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path) as db:
            return int(db.execute("SELECT COUNT(*) FROM runs WHERE status='running'").fetchone()[0])
    except sqlite3.OperationalError:  # the submit is creating the store: no table yet, or locked
        return 0


def test_sigterm_ends_an_embedded_submit_as_ctrl_c_does(tmp_path: Path, tiny_model: Path) -> None:
    process, descendants = start_long_submit(tmp_path / "home", tiny_model)
    try:
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        took_s = time.monotonic() - began
    finally:
        kill_tree(process.pid)
    assert process.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == "farm: error: interrupted"
    assert took_s < 15
    with sqlite3.connect(tmp_path / "home" / "results.sqlite") as db:
        assert [r[0] for r in db.execute("SELECT status FROM runs")] == ["interrupted"]
    wait_for(lambda: not alive(descendants), GONE_WITHIN_S, "the embedded Ray's processes to end")


def test_kill_9_of_an_embedded_submit_leaves_no_process_behind(tmp_path: Path, tiny_model: Path) -> None:
    process, descendants = start_long_submit(tmp_path / "home", tiny_model)
    assert len(descendants) >= 3  # the watchdog, the GCS, the raylet, workers
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        began = time.monotonic()
        try:
            wait_for(lambda: not alive(descendants), GONE_WITHIN_S, "the orphaned Ray processes to end")
        finally:
            left = alive(descendants)
            for pid in left:  # never leave them to the next test, even when this one fails
                kill_tree(pid)
        assert not left
        print(f"orphans gone {time.monotonic() - began:.2f} s after kill -9")
    finally:
        kill_tree(process.pid)
