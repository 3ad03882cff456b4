"""Following a running run from the store (`farm/ondevice_farm/run_follow.py`): `farm show RUN
--follow` says its progress against the planned jobs until it ends, then shows it; `farm runs`
lists a running run's jobs stored of planned."""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from ondevice_farm.config import FarmHome
from ondevice_farm.run_follow import progress_line, wait_for_end
from ondevice_farm.store import ResultsStore, RunRow, new_run_id

HOST_RUN = Path(__file__).parent / "fixtures" / "host" / "tinynet_busy_host.json"


def _job(run_id: str, index: int) -> dict[str, Any]:
    job: dict[str, Any] = copy.deepcopy(json.loads(HOST_RUN.read_text())["jobs"][0])
    job.update(job_id=f"{run_id}-{index}", run_id=run_id, finished_at=float(job["finished_at"]) + index)
    return job


def _running_run(home: Path, planned: int, stored: int) -> str:
    run = json.loads(HOST_RUN.read_text())
    header = {k: v for k, v in run.items() if k not in ("jobs", "status", "created_at", "finished_at")}
    run_id = new_run_id()
    with ResultsStore(FarmHome(home).store_path) as store:
        store.start_run(run_id, "submit", {**header, "run_id": run_id, "planned_jobs": planned})
        for index in range(stored):
            store.add_job(run_id, _job(run_id, index))
    return run_id


class Unfolding:
    """A store whose run gains a job at each look and ends once all are stored."""

    def __init__(self, planned: int) -> None:
        self.planned, self.stored, self.looks = planned, 0, 0

    def row(self) -> RunRow:
        status = "running" if self.stored < self.planned else "complete"
        return RunRow("r1", 0.0, None, "submit", None, status, {"planned_jobs": self.planned})

    def job_counts(self, run_id: str) -> dict[str, int]:
        self.looks += 1
        return {"ok": self.stored}

    def run(self, run_id: str) -> RunRow:
        self.stored += 1
        return self.row()


def test_a_follower_says_the_progress_against_the_plan_and_returns_the_ended_run() -> None:
    store, said = Unfolding(3), list[str]()
    ended = wait_for_end(store, store.row(), said.append, every_s=0, report_every_s=0, sleep=lambda s: None)
    assert ended.status == "complete" and store.looks == 3
    assert said == [
        f"run r1: {n} of 3 jobs stored{f' ({n} ok)' if n else ''}; following it to its end" for n in range(3)
    ]
    # a line at most every report_every_s: one, however many looks
    store = Unfolding(5)
    lines: list[str] = []
    wait_for_end(store, store.row(), lines.append, every_s=0, report_every_s=3600, sleep=lambda s: None)
    assert len(lines) == 1 and store.looks == 5


def test_ctrl_c_while_following_leaves_the_run_alone() -> None:
    store = Unfolding(3)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wait_for_end(store, store.row(), lambda line: None, sleep=interrupted)
    assert store.stored == 0  # nothing written, nothing cancelled: the store was only read


def test_progress_line_counts_every_status_and_says_no_plan_when_none() -> None:
    row = RunRow("r2", 0.0, None, "nightly", "s", "running", {"planned_jobs": 3000})
    line = progress_line(row, {"ok": 1230, "failed": 4, "lost": 0})
    assert line == "run r2: 1,234 of 3,000 jobs stored (4 failed, 1,230 ok)"
    assert (
        progress_line(RunRow("r3", 0.0, None, "submit", None, "running", {}), {}) == "run r3: 0 jobs stored"
    )


def test_farm_show_follow_waits_for_the_end_and_farm_runs_counts_against_the_plan(tmp_path: Path) -> None:
    run_id = _running_run(tmp_path, planned=2, stored=1)
    listed = CliRunner().invoke(cli, ["--home", str(tmp_path), "runs", "--json"], catch_exceptions=False)
    [entry] = json.loads(listed.stdout)["runs"]
    assert entry["status"] == "running" and entry["planned_jobs"] == 2 and sum(entry["jobs"].values()) == 1
    table = CliRunner().invoke(cli, ["--home", str(tmp_path), "runs"], catch_exceptions=False)
    assert "1 of 2 stored" in table.stdout

    def finish() -> None:
        time.sleep(1.0)
        with ResultsStore(FarmHome(tmp_path).store_path) as store:
            store.add_job(run_id, _job(run_id, 1))
            store.finish_run(run_id, "complete")

    writer = threading.Thread(target=finish)
    writer.start()
    began = time.monotonic()
    shown = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "show", run_id[:15], "--follow", "--json"], catch_exceptions=False
    )
    writer.join()
    assert shown.exit_code == 0, shown.output[-2000:]
    assert time.monotonic() - began >= 1.0  # it waited for the writer
    assert f"run {run_id}: 1 of 2 jobs stored (1 ok); following it to its end" in shown.stderr
    document = json.loads(shown.stdout)
    assert document["status"] == "complete" and len(document["jobs"]) == 2 and document["planned_jobs"] == 2
