"""`farm gc` beside running jobs: what a job's lease holds stays; a dead process's lease does not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.gc.leases import Lease, LeaseBook, artifact_key
from ondevice_farm.gc.policy import RetentionPolicy
from ondevice_farm.gc.schedule import collect_once
from ondevice_farm.gc.sweep import collect_garbage, plan_gc
from tests.compare.conftest import matmul_chain

from .history import run_month, run_night, simulated_farm

#: everything not leased or named by a kept run goes, however recently used
GREEDY = RetentionPolicy(keep_runs=1, keep_days=0, min_idle_s=0)


class Stop(Exception):
    pass


@pytest.mark.parametrize("leased", [True, False], ids=["leased", "control-without-lease"])
def test_gc_while_a_nightly_job_runs_leaves_its_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leased: bool
) -> None:
    """Mid-job, a greedy gc removes the old versions but not what tonight's jobs use; without the
    pipeline's lease (the control) the same gc takes the running job's artifact."""
    with simulated_farm(tmp_path, monkeypatch) as month:
        run_month(month, nights=3, change_every=1)  # a new version every night
        if not leased:
            monkeypatch.setattr(Lease, "hold", lambda self, *keys: None)
        seen: dict[str, bool] = {}
        removed: list[str] = []

        def gc_now(spec: JobSpec) -> None:
            if seen:
                return
            outcome = collect_once(month.home, month.home.store_path, GREEDY)
            assert outcome.result is not None
            removed.extend(r.name for r in outcome.result.removed if r.kind == "artifacts")
            seen["artifact"] = spec.request.artifact.is_file()
            if not leased:
                raise Stop("the control stops here: its artifact is gone")

        month.fleet.during_job = gc_now
        if leased:
            tonight = run_night(month, night=3, nights_ago=0, change_every=1)
            assert all(j["status"] == "ok" for j in tonight["jobs"])
            assert seen["artifact"] is True
            assert removed  # gc did run: the versions no kept run names went
        else:
            with pytest.raises(Stop):
                run_night(month, night=3, nights_ago=0, change_every=1)
            assert seen["artifact"] is False


def _holder(home: Path, key: str) -> subprocess.Popen[str]:
    """Another process holding a lease on `key` until killed."""
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from ondevice_farm.gc.leases import LeaseBook\n"
        "with LeaseBook(Path(sys.argv[1])).lease() as lease:\n"
        "    with lease.placing():\n"
        "        lease.hold(sys.argv[2])\n"
        "    print('held', flush=True)\n"
        "    time.sleep(600)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(home), key], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _old_artifact(home: FarmHome, tmp_path: Path) -> Path:
    _sha, path = ArtifactStore(home.artifacts).put(
        matmul_chain(tmp_path / "m.onnx", 1, width=8), "model.onnx"
    )
    old = time.time() - 90 * 86400
    for item in (path, path.parent):
        os.utime(item, (old, old))
    return path


def test_a_live_lease_in_another_process_keeps_an_artifact_and_a_killed_one_does_not(tmp_path: Path) -> None:
    home = FarmHome(tmp_path / "home")
    path = _old_artifact(home, tmp_path)
    holder = _holder(home.root, artifact_key(path.parent.name))
    try:
        outcome = collect_once(home, home.store_path, GREEDY)
        assert path.is_file() and outcome.plan.leased == 1 and not outcome.plan.removals
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    # its process died without releasing it: the lease file is left, unlocked, and means nothing
    assert list((home.root / "leases").iterdir())
    dry = collect_once(home, home.store_path, GREEDY, dry_run=True)
    assert [r.path for r in dry.plan.removals] == [path.parent] and path.is_file()
    assert list((home.root / "leases").iterdir())  # a dry run changes nothing, dead leases included
    outcome = collect_once(home, home.store_path, GREEDY)
    assert not path.exists() and [r.name for r in outcome.plan.removals] == [
        str(path.parent.relative_to(home.root))
    ]
    assert not list((home.root / "leases").iterdir())


def test_a_job_finding_its_files_waits_while_gc_moves_them(tmp_path: Path) -> None:
    """The gc lock orders the two sides: a job that looks while gc sweeps looks after it, and
    finds the artifact gone (it will compile it again), never half there."""
    home = FarmHome(tmp_path / "home")
    path = _old_artifact(home, tmp_path)
    book = LeaseBook(home.root)
    found: list[bool] = []
    entered = threading.Event()

    def job() -> None:
        with book.lease() as lease, lease.placing():
            found.append(path.exists())

    def while_locked() -> None:
        worker = threading.Thread(target=job)
        worker.start()
        entered.set()
        worker.join(0.5)
        assert worker.is_alive() and not found  # blocked on the gc lock
        threads.append(worker)

    threads: list[threading.Thread] = []
    plan = plan_gc(home, None, GREEDY, time.time())
    result = collect_garbage(home, None, plan, GREEDY, time.time(), while_locked=while_locked)
    threads[0].join(10)
    assert entered.is_set() and found == [False] and [r.path for r in result.removed] == [path.parent]
