"""The fleet on a real three-node Ray cluster: `farm serve` on the head, `farm agent` on two
workers, `farm submit`/`farm nightly --address` as a user would run them.

The tests share one cluster and run in file order; the last one kills a worker node.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from tests.fleet.cluster import VENV_BIN, kill_tree
from tests.fleet.conftest import Fleet, wait_for

pytestmark = pytest.mark.slow


def make_model(directory: Path, name: str, width: int) -> Path:
    path = directory / f"{name}.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])], name, [x], [y]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def write_suite(
    path: Path,
    name: str,
    models: list[Path],
    devices: list[str],
    runs: int,
    warmup: int = 1,
    repeats: int = 1,
) -> Path:
    lines = [
        f"name: {name}",
        f"devices: [{', '.join(devices)}]",
        f"runs: {runs}",
        f"warmup: {warmup}",
        f"repeats: {repeats}",
        "placement_deadline_s: 30",
        "models:",
    ]
    lines += [f"  - path: {m}" for m in models]
    path.write_text("\n".join(lines) + "\n")
    return path


def parse(stdout: str, stderr: str) -> dict[str, Any]:
    try:
        document: dict[str, Any] = json.loads(stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"stdout is not one JSON document:\n{stdout[-1500:]}\nstderr:\n{stderr[-3000:]}"
        ) from None
    return document


def run_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return parse(done.stdout, done.stderr)


def spawn_farm(fleet: Fleet, name: str, *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [str(VENV_BIN / "farm"), "--home", str(fleet.home), *args],
        env={**fleet.cluster.env, "FARM_SIMULATED_DEVICES": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    fleet.cluster.processes.append(process)  # type: ignore[arg-type]
    return process


def busy_units(fleet: Fleet) -> list[str]:
    return [u["serial"] for u in fleet.units() if u["busy"]]


def test_devices_lists_every_hosts_units_through_the_controller(fleet: Fleet) -> None:
    done = fleet.farm("devices", "--address", fleet.cluster.address, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    document = run_json(done)
    host_units = {u["serial"] for u in document["units"] if u["profile"] == "host-cpu"}
    assert host_units == {"n2", "n3"}  # one per worker node, each registered by its own `farm agent`
    assert {u["profile"] for u in document["units"]} == {"host-cpu", "simulated"}
    assert len({u["node_id"] for u in document["units"]}) == 2
    assert next(p for p in document["profiles"] if p["name"] == "host-cpu")["attached"] == 2


def test_a_suite_spreads_over_both_workers(fleet: Fleet, tmp_path: Path) -> None:
    models = [make_model(tmp_path, f"m{i}", 32 + i) for i in range(4)]
    suite = write_suite(tmp_path / "spread.yaml", "spread", models, ["host-cpu"], runs=5)
    done = fleet.farm("nightly", str(suite), "--address", fleet.cluster.address, "--json")
    document = run_json(done)
    assert done.returncode == 0, done.stderr[-2000:]
    jobs = document["jobs"]
    assert len(jobs) == 4 and all(j["status"] == "ok" for j in jobs)
    assert {j["unit"] for j in jobs} == {"n2", "n3"}
    assert all(len(j["latency_ms"]["samples"]) == 5 and j["reference"]["passed"] for j in jobs)
    assert document["comparison"]["baseline_run"] is None  # the suite's first run
    with sqlite3.connect(fleet.home / "results.sqlite") as db:
        status, kind, suite_name = db.execute(
            "SELECT status, kind, suite FROM runs WHERE run_id=?", (document["run_id"],)
        ).fetchone()
        (count,) = db.execute("SELECT COUNT(*) FROM jobs WHERE run_id=?", (document["run_id"],)).fetchone()
    assert (status, kind, suite_name, count) == ("complete", "nightly", "spread", 4)


def test_a_submitter_with_its_own_empty_home_stores_its_run_at_the_controller(
    fleet: Fleet, tmp_path: Path
) -> None:
    """A CI runner elsewhere: its own empty FARM_HOME, the cluster's token, `--address`. The run
    lands in the head's store once, and the head's /metrics and `farm runs --address` show it."""
    model = make_model(tmp_path, "elsewhere", 24)
    home = tmp_path / "runner-home"
    address = ("--address", fleet.cluster.address)
    env = {"FARM_SIMULATED_DEVICES": "1"}
    submit = ("submit", str(model), "--devices", "simulated", "--runs", "3", "--json")
    done = fleet.cluster.farm("--home", str(home), *submit, *address, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    run_id = run_json(done)["run_id"]
    assert not (home / "results.sqlite").exists()  # the fleet's history is not kept per submitter
    with sqlite3.connect(fleet.home / "results.sqlite") as db:
        (status,) = db.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()
        (jobs,) = db.execute("SELECT COUNT(*) FROM jobs WHERE run_id=?", (run_id,)).fetchone()
    assert (status, jobs) == ("complete", 1)

    listing = fleet.cluster.farm("--home", str(home), "runs", *address, "--json", env=env)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert run_id in [r["run_id"] for r in run_json(listing)["runs"]]
    shown = fleet.cluster.farm("--home", str(home), "show", run_id, *address, "--json", env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [j["status"] for j in run_json(shown)["jobs"]] == ["ok"]
    missing = fleet.cluster.farm("--home", str(home), "show", "no-such-run", *address, env=env)
    assert missing.returncode == 2 and "no run 'no-such-run'" in missing.stderr

    scraped = urllib.request.urlopen(fleet.metrics_url(), timeout=30).read().decode()
    assert 'model="elsewhere"' in scraped


def test_a_job_no_unit_can_take_waits_then_fails_clearly(fleet: Fleet, tiny_model: Path) -> None:
    started = time.monotonic()
    done = fleet.farm(
        "submit",
        str(tiny_model),
        "--devices",
        "simulated:no-such-unit",
        "--address",
        fleet.cluster.address,
        "--placement-deadline",
        "2",
        "--runs",
        "3",
        "--json",
    )
    (job,) = run_json(done)["jobs"]
    assert done.returncode == 1
    assert "no unit of simulated:no-such-unit is up; waiting up to 2s" in " ".join(done.stderr.split())
    assert job["status"] == "failed" and job["error_type"] == "SchedulingError"
    assert job["error"] == "no unit of simulated:no-such-unit came up within 2s"
    assert time.monotonic() - started < 60


def test_a_device_that_vanishes_mid_job_is_retried_on_another_unit(fleet: Fleet, tiny_model: Path) -> None:
    process = spawn_farm(
        fleet,
        "vanish",
        "submit",
        str(tiny_model),
        "--devices",
        "simulated",
        "--runs",
        "1500",
        "--warmup",
        "0",
        "--no-profile",
        "--address",
        fleet.cluster.address,
        "--json",
    )
    try:
        wait_for(lambda: bool(busy_units(fleet)), 60, "the job to start on a simulated unit")
        victim = busy_units(fleet)[0]
        fleet.unplugged.write_text(victim + "\n")
        stdout, stderr = process.communicate(timeout=90)
    finally:
        kill_tree(process.pid)
    document = parse(stdout, stderr)
    (job,) = document["jobs"]
    assert process.returncode == 0, stderr[-2000:]
    assert job["status"] == "ok" and job["unit"] != victim
    assert [a["unit"].split(":")[1] for a in job["attempts"]] == [victim, job["unit"]]
    assert "DeviceLostError" in job["attempts"][0]["error"] and job["attempts"][1]["error"] is None
    assert "trying another unit" in " ".join(stderr.split())
    down = [u for u in fleet.units() if u["serial"] == victim]
    assert down and not down[0]["up"]
    fleet.unplugged.write_text("")
    wait_for(lambda: any(u["up"] for u in fleet.units() if u["serial"] == victim), 30, "the unit to return")


def test_an_interactive_submit_is_not_starved_by_a_big_nightly(
    fleet: Fleet, tmp_path: Path, tiny_model: Path
) -> None:
    models = [make_model(tmp_path, f"big{i}", 16 + i) for i in range(4)]
    units = ["simulated:n2-0", "simulated:n2-1", "simulated:n3-0", "simulated:n3-1"]
    # jobs long enough (~6 s each here) that a slow machine's `farm submit` start-up still finds
    # nightly jobs waiting: CI once took over two nightly jobs' time to queue the interactive one
    suite = write_suite(tmp_path / "big.yaml", "big", models, units, runs=3000, warmup=0)
    nightly = spawn_farm(
        fleet, "big", "nightly", "--allow-simulated", str(suite), "--address", fleet.cluster.address, "--json"
    )
    try:
        wait_for(lambda: len(busy_units(fleet)) >= 4, 60, "the nightly to occupy every simulated unit")
        interactive = fleet.farm(
            "submit",
            str(tiny_model),
            "--devices",
            "simulated",
            "--runs",
            "5",
            "--json",
            "--address",
            fleet.cluster.address,
        )
        assert nightly.poll() is None, "the nightly finished before the interactive job: no contention tested"
        stdout, _stderr = nightly.communicate(timeout=120)
    finally:
        kill_tree(nightly.pid)
    (job,) = run_json(interactive)["jobs"]
    big = parse(stdout, _stderr)
    assert job["status"] == "ok" and len(big["jobs"]) == 16 and all(j["status"] == "ok" for j in big["jobs"])
    # it waited for one unit to come free (about one nightly job), not for the ones still queued
    longest_nightly_job_s = max(j["duration_s"] for j in big["jobs"])
    assert job["started_at"] - job["queued_at"] < 1.5 * longest_nightly_job_s
    # the fleet's own clock: when it queued the interactive job and when it sent each job to a unit
    # (how long `farm submit` took to start is the machine's, so no count of jobs is assumed)
    (interactive_attempt,) = job["attempts"]
    sent = [j["attempts"][-1]["started_at"] for j in big["jobs"]]
    after = sum(1 for t in sent if t > interactive_attempt["started_at"])
    assert after >= 1, "every nightly job was sent before the interactive one: no contention tested"
    # submissions take turns: the nightly, whose turn it was, gets at most the one unit that came free first
    overtook = sum(1 for t in sent if job["queued_at"] < t < interactive_attempt["started_at"])
    assert overtook <= 1, f"{overtook} nightly jobs were sent to units while the interactive one waited"


def test_nightly_flags_a_slower_device_and_nothing_on_an_aa_rerun(
    fleet: Fleet, tmp_path: Path, tiny_model: Path
) -> None:
    suite = write_suite(
        tmp_path / "regress.yaml",
        "regress",
        [tiny_model],
        ["simulated:n2-1", "simulated:n3-1"],
        runs=40,
        repeats=3,
    )
    # the session-level test gives a verdict once a job has 3 earlier runs (its night-to-night drift)
    address = ("--address", fleet.cluster.address)
    for _ in range(3):
        first = fleet.farm("nightly", "--allow-simulated", str(suite), *address, "--json")
        assert first.returncode == 0, first.stderr[-2000:]
    again = fleet.farm("nightly", "--allow-simulated", str(suite), *address, "--json")
    aa = run_json(again)
    assert again.returncode == 0, again.stdout[-3000:]
    assert aa["comparison"]["baseline_run"] == run_json(first)["run_id"]
    assert aa["comparison"]["regressions"] == 0
    assert {j["status"] for j in aa["comparison"]["jobs"]} == {"compared"}
    assert {j["verdict"] for j in aa["comparison"]["jobs"]} <= {"unchanged", "improved"}

    fleet.slow.write_text("n3-1=1.3\n")
    try:
        slower = fleet.farm("nightly", "--allow-simulated", str(suite), *address, "--json")
    finally:
        fleet.slow.write_text("")
    result = run_json(slower)
    assert slower.returncode == 1
    assert result["comparison"]["baseline_run"] == aa["run_id"]
    flagged = [j for j in result["comparison"]["jobs"] if j["regression"]]
    assert [j["device"] for j in flagged] == ["simulated:n3-1"]
    (finding,) = flagged[0]["findings"]
    assert finding["kind"] == "latency" and 1.2 < finding["details"]["ratio"] < 1.4
    human = fleet.farm("nightly", "--allow-simulated", str(suite), *address, "--baseline", aa["run_id"])
    assert human.returncode == 0 and "no regressions" in human.stdout


def run_jobs_in_store(fleet: Fleet, suite: str) -> tuple[str | None, str | None, list[str]]:
    """(run id, run status, its jobs' statuses) of the suite's newest run."""
    with sqlite3.connect(fleet.home / "results.sqlite") as db:
        row = db.execute(
            "SELECT run_id, status FROM runs WHERE suite=? ORDER BY created_at DESC LIMIT 1", (suite,)
        ).fetchone()
        if row is None:
            return None, None, []
        jobs = [r[0] for r in db.execute("SELECT status FROM jobs WHERE run_id=?", (row[0],)).fetchall()]
    return row[0], row[1], jobs


def test_a_night_outlives_a_controller_killed_mid_suite_and_a_submitters_crash_leaves_no_half_run(
    fleet: Fleet, tmp_path: Path, tiny_model: Path
) -> None:
    models = [make_model(tmp_path, f"c{i}", 8 + i) for i in range(12)]
    suite = write_suite(tmp_path / "crash.yaml", "crash", models, ["simulated"], runs=2000, warmup=0)
    nightly = spawn_farm(
        fleet,
        "crash",
        "nightly",
        "--allow-simulated",
        str(suite),
        "--address",
        fleet.cluster.address,
        "--json",
    )
    try:
        wait_for(lambda: len(run_jobs_in_store(fleet, "crash")[2]) >= 2, 90, "two jobs of the suite stored")
        # the controller dies mid-suite; its fleet actor is detached and runs the night on
        kill_tree(fleet.serve.pid)
        fleet.restart_serve()  # adopts the fleet
        stdout, stderr = nightly.communicate(timeout=120)
    finally:
        kill_tree(nightly.pid)
    assert nightly.returncode == 0, stderr[-2000:]
    assert "adopted the fleet a controller that died left running" in fleet.cluster.log("serve")
    run_id, status, jobs = run_jobs_in_store(fleet, "crash")
    assert run_id == parse(stdout, stderr)["run_id"]
    assert status == "complete" and jobs == ["ok"] * len(models)
    # while its owner lives, no second controller takes the fleet
    second = fleet.farm("serve", "--address", fleet.cluster.address, "--api-port", "0", timeout_s=90)
    assert second.returncode != 0 and "already running" in second.stderr, second.stderr[-2000:]

    killed = spawn_farm(
        fleet, "crash2", "nightly", "--allow-simulated", str(suite), "--address", fleet.cluster.address
    )
    try:
        wait_for(
            lambda: run_jobs_in_store(fleet, "crash")[0] not in (None, run_id), 60, "the second run to start"
        )
        kill_tree(killed.pid)  # the submitter dies without a word
    finally:
        kill_tree(killed.pid)
    second, status, _ = run_jobs_in_store(fleet, "crash")
    assert status == "running"
    # the night is the controller's: it runs to its end, and the fleet finishes the run
    wait_for(lambda: run_jobs_in_store(fleet, "crash")[1] != "running", 90, "the night to end")
    assert run_jobs_in_store(fleet, "crash") == (second, "complete", ["ok"] * len(models))


def test_a_night_handed_to_the_controller_is_left_followed_again_and_cancelled(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Ctrl-C on a following `farm nightly --address` stops following, not the night; `--follow
    RUN` waits for its end and gives the verdict; `--detach` returns at once; `farm cancel RUN`
    stops a night, marking it interrupted."""
    models = [make_model(tmp_path, f"h{i}", 8 + i) for i in range(12)]
    # jobs of ~8 s (4,000 runs of 2 ms), 3 rounds on the 4 simulated units: the follower is still
    # following when it is stopped, and the detached night still running when it is cancelled
    suite = write_suite(tmp_path / "handed.yaml", "handed", models, ["simulated"], runs=4000, warmup=0)
    address = ("--address", fleet.cluster.address)
    follower = spawn_farm(fleet, "handed", "nightly", "--allow-simulated", str(suite), *address)
    try:
        # mid-night: its run recorded and its jobs on the units (a stored job was seen only as the
        # night ended in a CI run: the follower was then done before its SIGINT)
        wait_for(lambda: run_jobs_in_store(fleet, "handed")[1] == "running", 90, "the night recorded")
        wait_for(lambda: busy_units(fleet), 60, "the night's jobs running")
        follower.send_signal(signal.SIGINT)
        _, stderr = follower.communicate(timeout=60)
    finally:
        kill_tree(follower.pid)
    assert follower.returncode == 130, stderr[-2000:]
    run_id, status, _ = run_jobs_in_store(fleet, "handed")
    assert f"stopped following run {run_id}: it goes on in the controller" in " ".join(stderr.split())
    assert run_id is not None and status == "running"
    # anyone may watch it through the submit API, no Ray needed: its progress, then the ended run
    shown = fleet.farm("show", run_id, "--follow", "--address", fleet.api_url(), "--json", timeout_s=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert re.search(rf"run {run_id}: \d+ of 12 jobs stored", shown.stderr), shown.stderr[-2000:]
    assert run_json(shown)["status"] == "complete"
    followed = fleet.farm(
        "nightly", "--allow-simulated", str(suite), *address, "--follow", run_id[:18], "--json", timeout_s=120
    )
    assert followed.returncode == 0, followed.stderr[-2000:]
    verdict = run_json(followed)
    assert verdict["run_id"] == run_id and verdict["status"] == "complete" and len(verdict["jobs"]) == 12
    assert "comparison" in verdict
    assert run_jobs_in_store(fleet, "handed") == (run_id, "complete", ["ok"] * len(models))

    began = time.monotonic()
    detached = fleet.farm("nightly", "--allow-simulated", str(suite), *address, "--detach", "--json")
    assert detached.returncode == 0, detached.stderr[-2000:]
    handed = run_json(detached)
    assert handed["status"] == "running" and handed["planned_jobs"] == 12
    cancelled = fleet.farm("cancel", handed["run_id"], "--address", fleet.api_url())  # over the submit API
    took_s = time.monotonic() - began
    assert cancelled.returncode == 0, cancelled.stderr[-2000:]
    assert f"run {handed['run_id']} cancelled" in cancelled.stderr
    second, status, jobs = run_jobs_in_store(fleet, "handed")
    assert second == handed["run_id"] and status == "interrupted" and len(jobs) < 12, (status, jobs, took_s)
    again = fleet.farm("cancel", handed["run_id"], *address)
    assert again.returncode == 7 and "has no jobs on this controller" in again.stderr
    wait_for(lambda: not busy_units(fleet), 30, "the cancelled night's jobs stopped")

    # a service's stop (SIGTERM) with --cancel-on-stop ends the night, not only its follower
    stopped = spawn_farm(
        fleet, "handed", "nightly", "--allow-simulated", str(suite), *address, "--cancel-on-stop"
    )
    try:
        wait_for(lambda: run_jobs_in_store(fleet, "handed")[0] not in (run_id, second), 90, "the third night")
        wait_for(lambda: busy_units(fleet), 60, "the third night's jobs running")
        stopped.send_signal(signal.SIGTERM)
        _, stderr = stopped.communicate(timeout=60)
    finally:
        kill_tree(stopped.pid)
    third, status, jobs = run_jobs_in_store(fleet, "handed")
    assert stopped.returncode == 130, stderr[-2000:]
    assert f"cancelled run {third} in the controller" in " ".join(stderr.split())
    assert status == "interrupted" and len(jobs) < 12, (status, jobs)
    wait_for(lambda: not busy_units(fleet), 30, "the third night's jobs stopped")


def test_killing_a_worker_node_mid_suite_loses_no_job(fleet: Fleet, tmp_path: Path) -> None:
    models = [make_model(tmp_path, f"k{i}", 8 + i) for i in range(8)]
    suite = write_suite(tmp_path / "survive.yaml", "survive", models, ["simulated"], runs=400, warmup=0)
    nightly = spawn_farm(
        fleet,
        "survive",
        "nightly",
        "--allow-simulated",
        str(suite),
        "--address",
        fleet.cluster.address,
        "--json",
    )
    try:
        wait_for(lambda: any(s.startswith("n3") for s in busy_units(fleet)), 60, "a job running on node n3")
        kill_tree(fleet.agents["n3"].pid)
        fleet.workers["n3"].kill()
        stdout, stderr = nightly.communicate(timeout=150)
    finally:
        kill_tree(nightly.pid)
    document = parse(stdout, stderr)
    jobs = document["jobs"]
    assert nightly.returncode == 0, stderr[-3000:]
    assert len(jobs) == 8 and all(j["status"] == "ok" for j in jobs)
    retried = [j for j in jobs if len(j["attempts"]) > 1]
    assert retried, "no job was running on the killed node"
    for job in retried:
        assert job["attempts"][0]["unit"].split(":")[1].startswith("n3") and job["attempts"][0]["error"]
        assert job["unit"].startswith("n2")
    with sqlite3.connect(fleet.home / "results.sqlite") as db:
        (status,) = db.execute("SELECT status FROM runs WHERE run_id=?", (document["run_id"],)).fetchone()
        rows = db.execute("SELECT status FROM jobs WHERE run_id=?", (document["run_id"],)).fetchall()
    assert status == "complete" and sorted(r[0] for r in rows) == ["ok"] * 8
    wait_for(
        lambda: not any(u["up"] for u in fleet.units() if u["serial"].startswith("n3")),
        30,
        "node n3's units to be marked down",
    )
