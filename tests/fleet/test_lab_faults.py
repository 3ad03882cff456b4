"""A night that survives, on the simulated lab (tests/fleet/lab.py): every check runs a real
`farm nightly` and reads the stored night back (every planned job exactly once, none lost, none
duplicated) after a real fault mid-night: the store's write lock held past its busy timeout, the
submitter paused past the controller's submitter timeout, a node's unit actors killed, a node's
agent killed (its units' pinned jobs then fail within the unit-down deadline, with the reason).
The agent's death is last: n3 serves no unit after it."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from tests.fleet.cluster import VENV_BIN
from tests.fleet.conftest import wait_for
from tests.fleet.lab import (
    NODES,
    UNITS_PER_NODE,
    Lab,
    device_actor_pids,
    device_actor_processes,
    simulated_units,
    write_model,
)

#: how long the night's store is locked: past its 30 s busy timeout (`DEFAULT_BUSY_TIMEOUT_S`)
STORE_LOCKED_S = 35.0


def stored_jobs(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def test_a_night_outlasts_its_store_locked_past_the_busy_timeout(lab: Lab, tmp_path: Path) -> None:
    """Mid-night, another process holds the SQLite store's write lock longer than a write waits
    for it (as a long `farm gc` batch could): the writes of the jobs finishing meanwhile fail once
    and are tried again, so the night ends with every planned job stored exactly once."""
    models = 10
    store = lab.home / "results.sqlite"
    before = stored_jobs(store)
    night = start_night(lab, blink_suite(tmp_path, "blink", models))
    try:
        wait_for(lambda: stored_jobs(store) >= before + 50, 240, "the night's first jobs stored")
        holder = sqlite3.connect(store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        locked_at = stored_jobs(store)
        time.sleep(STORE_LOCKED_S)
        assert stored_jobs(store) == locked_at  # nothing was written while the lock was held
        holder.execute("ROLLBACK")
        holder.close()
    finally:
        stdout, stderr = finish_night(night, 400)
    assert night.returncode == 0, stderr[-3000:]
    assert_every_planned_job_once(lab, stored_run(store, json.loads(stdout)["run_id"]), models)


def blink_suite(tmp_path: Path, name: str, models: int) -> Path:
    """A night of `models` models on every simulated unit (`simulated:*`)."""
    model = write_model(tmp_path / "m.onnx")
    paths = []
    for index in range(models):
        copy = tmp_path / f"b{index:02d}.onnx"
        copy.write_bytes(model.read_bytes())
        paths.append(f"  - path: {copy}")
    suite = tmp_path / f"{name}.yaml"
    lines = [
        f"name: {name}", "devices: ['simulated:*']", "targets: [ort/xnnpack]", "runs: 100", "warmup: 0",
        "repeats: 1", "allow_simulated: true", "models:", *paths,
    ]  # fmt: skip
    suite.write_text("\n".join(lines) + "\n")
    return suite


def start_night(lab: Lab, suite: Path) -> subprocess.Popen[str]:
    command = ["nightly", str(suite), "--address", lab.cluster.address, "--json"]
    return subprocess.Popen(
        [str(VENV_BIN / "farm"), "--home", str(lab.home), *command],
        env={**lab.cluster.env, "FARM_SIMULATED_DEVICES": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_night(night: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    try:
        return night.communicate(timeout=timeout_s)
    finally:
        if night.poll() is None:
            night.kill()
            night.wait()


def stored_run(store: Path, run_id: str) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT job_id, model_name, unit, status FROM jobs WHERE run_id=?", (run_id,)
        ).fetchall()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]


def assert_every_planned_job_once(lab: Lab, rows: list[tuple[str, str, str, str]], models: int) -> None:
    units = simulated_units(lab)
    assert len(rows) == models * len(units) and len({r[0] for r in rows}) == len(rows)
    assert {(r[1], r[2]) for r in rows} == {(f"b{i:02d}", u) for i in range(models) for u in units}
    assert {r[3] for r in rows} == {"ok"}


def test_a_night_outlives_its_submitter_paused_past_the_submitter_timeout(lab: Lab, tmp_path: Path) -> None:
    """The submitter (a Ray driver) is SIGSTOPped mid-night for 4x the controller's submitter
    timeout (`start_serve`: 4 s): Ray says its driver is alive, so its submission is kept and its
    jobs run on; resumed, it hears them all and the night is stored whole, each job once."""
    models = 10
    store = lab.home / "results.sqlite"
    before = stored_jobs(store)
    night = start_night(lab, blink_suite(tmp_path, "paused", models))
    try:
        wait_for(lambda: stored_jobs(store) >= before + 50, 240, "the night's first jobs stored")
        night.send_signal(signal.SIGSTOP)
        time.sleep(16.0)
        paused_at = stored_jobs(store)
        time.sleep(2.0)
        # its jobs went on while it was paused (or had all run): not dropped as abandoned
        assert stored_jobs(store) > paused_at or paused_at >= before + models * len(simulated_units(lab))
    finally:
        night.send_signal(signal.SIGCONT)
    stdout, stderr = finish_night(night, 400)
    assert night.returncode == 0, stderr[-3000:]
    assert_every_planned_job_once(lab, stored_run(store, json.loads(stdout)["run_id"]), models)


def night_on_every_unit(lab: Lab, tmp_path: Path, timeout_s: float) -> tuple[int, list[dict[str, Any]]]:
    """`farm nightly` over `simulated:*`: its exit code and every job it stored."""
    suite = blink_suite(tmp_path, "every-unit", 1)
    done = lab.farm("nightly", str(suite), "--address", lab.cluster.address, "--json", timeout_s=timeout_s)
    assert done.stdout, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    shown = lab.farm("show", run_id, "--json", "--jobs", "1000", "--address", lab.cluster.address)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return done.returncode, json.loads(shown.stdout)["jobs"]


def test_a_night_on_every_unit_outlives_the_death_of_a_nodes_unit_actors(lab: Lab, tmp_path: Path) -> None:
    """`simulated:*` is a job pinned to each unit up; n2's DeviceActor processes are killed just
    before: each of its units fails at most one attempt (the fleet keeps a dead actor's unit down
    however often the agent lists it; the agent starts a new actor) and every job runs once."""
    units = simulated_units(lab)
    assert len(units) == len(NODES) * UNITS_PER_NODE
    node = lab.nodes["n2"]
    killed = device_actor_pids(node)
    assert len(killed) == 2  # the host unit's actor and the simulated units' shared one
    for pid in killed:
        psutil.Process(pid).kill()
    code, jobs = night_on_every_unit(lab, tmp_path, timeout_s=300)
    assert code == 0, [(j["unit"], j.get("error")) for j in jobs if j["status"] != "ok"][:5]
    # one job per unit up, each on its own unit, each once
    assert sorted(j["unit"] for j in jobs) == sorted(units)
    assert all(j["status"] == "ok" and j["requested"] == f"simulated:{j['unit']}" for j in jobs)
    on_n2 = [j for j in jobs if j["unit"].startswith("n2-")]
    assert max(len(j["attempts"]) for j in on_n2) <= 2, [j["attempts"] for j in on_n2][:3]
    failed = [a for j in on_n2 for a in j["attempts"] if a["error"]]
    assert all("died" in a["error"] for a in failed), failed[:3]
    # n2 serves its units with new actors
    wait_for(lambda: device_actor_processes(node) == 2, 60, "n2's new actors")
    assert not set(device_actor_pids(node)) & set(killed)


def test_jobs_pinned_to_units_whose_agent_died_fail_within_a_minute_with_the_reason(
    lab: Lab, tmp_path: Path
) -> None:
    """n3's agent is killed (its actors die with it, its units are never listed again): a night
    over `simulated:*` ends within the unit-down deadline (45 s), not the placement deadline
    (600 s), with each n3 unit's job lost with the reason and every other unit's job done.
    Last in the module: n3 serves no unit afterwards."""
    units = simulated_units(lab)
    agent = lab.agents["n3"]
    agent.kill()
    agent.wait(timeout=30)
    began = time.monotonic()
    code, jobs = night_on_every_unit(lab, tmp_path, timeout_s=240)
    took_s = time.monotonic() - began
    assert code != 0 and took_s < 150, (code, took_s)
    assert sorted(j["unit"] for j in jobs) == sorted(units)
    lost = [j for j in jobs if j["unit"].startswith("n3-")]
    assert len(lost) == UNITS_PER_NODE
    assert all(j["status"] != "ok" for j in lost)
    assert all(
        f"unit simulated:{j['unit']} is lost" in j["error"] and "died" in j["error"] and "45s" in j["error"]
        for j in lost
    ), lost[0]["error"]
    assert all(j["status"] == "ok" for j in jobs if not j["unit"].startswith("n3-"))
