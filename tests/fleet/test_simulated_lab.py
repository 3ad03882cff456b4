"""A simulated lab: ~100 simulated units over three Ray nodes on loopback, one `farm agent` per node
and `farm serve` on the head, driven by the real `farm nightly` (docs/fleet.md, "Simulated lab").

Checks: a node's simulated units share one DeviceActor process (counted in each node's process
tree: Ray titles an actor's process `ray::DeviceActorImpl...`); a nightly over them runs on units
of every node and stores, per job, a synthetic result that went through the analysis (a 200-op
profile with CPU fallbacks, 100 samples, outputs compared with the reference); a 2,000-job nightly
over 100 of them is stored whole while neither the submitter nor the controller ever holds more
than a bounded few job documents (counted, not timed); a nightly on simulated units is refused
unless asked for; and a night survives real faults mid-night (the store locked past its busy
timeout, the submitter paused past the controller's timeout, a node's unit actors killed, a node's
agent killed), every planned job stored exactly once.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fleet.cluster import VENV_BIN
from tests.fleet.conftest import wait_for
from tests.fleet.lab import (
    NODES,
    ROOT,
    UNITS_PER_NODE,
    Lab,
    device_actor_pids,
    device_actor_processes,
    simulated_units,
    write_model,
)


def test_a_nodes_simulated_units_share_one_actor_process(lab: Lab) -> None:
    simulated = [u for u in lab.units() if u["name"].startswith("simulated:")]
    assert len(simulated) == len(NODES) * UNITS_PER_NODE
    # Ray starts an actor's process after its handle is registered: wait for each node's first two
    wait_for(lambda: all(device_actor_processes(n) >= 2 for n in lab.nodes.values()), 90, "actor processes")
    for name, node in lab.nodes.items():
        # the node's host unit has an actor of its own; its 34 simulated units one between them
        assert device_actor_processes(node) == 2, name


def write_suite(path: Path, model: Path, allow: bool = False) -> Path:
    # units named on every node (the scheduler's spreading is tests/fleet/test_fleet.py's)
    units = [f"simulated:{name}-{i}" for name, _ in NODES for i in (0, UNITS_PER_NODE - 1)]
    lines = [
        "name: lab",
        f"devices: [{', '.join(units)}]",
        "targets: [ort/xnnpack]",
        "runs: 100",
        "warmup: 0",
        "repeats: 1",
        *(["allow_simulated: true"] if allow else []),
        "models:",
        f"  - path: {model}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_nightly_runs_on_every_node_and_stores_a_realistic_synthetic_result(
    lab: Lab, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "lab.yaml", write_model(tmp_path / "lab.onnx"), allow=True)
    done = lab.farm("nightly", str(suite), "--address", lab.cluster.address, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    shown = lab.farm("show", run_id, "--json", "--address", lab.cluster.address)
    assert shown.returncode == 0, shown.stderr[-3000:]
    jobs = json.loads(shown.stdout)["jobs"]
    assert len(jobs) == 2 * len(NODES) and all(j["status"] == "ok" for j in jobs)
    assert {j["unit"].split("-")[0] for j in jobs} == {name for name, _ in NODES}
    job = jobs[0]
    assert len(job["ops"]) == 200 and len(job["latency_ms"]["samples"]) == 100
    assert {op["time_source"] for op in job["ops"]} == {"synthetic"}
    assert job["placement"]["XnnpackExecutionProvider"] > job["placement"]["CPUExecutionProvider"] > 0
    assert job["fallback_ops"] and job["provenance"]["latency"] == "synthetic"
    assert job["provenance"]["outputs"] == "synthetic" and job["reference"]["status"] == "passed"
    assert job["load_ms"] > 0 and job["first_inference_ms"] > 0 and job["compile"]


def test_a_nightly_on_simulated_units_is_refused_unless_asked_for(lab: Lab, tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "lab.yaml", write_model(tmp_path / "lab.onnx"))
    refused = lab.farm("nightly", str(suite), "--address", lab.cluster.address)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "simulated units" in refused.stderr and "--allow-simulated" in refused.stderr
    assert not any(u["busy"] for u in lab.units())


#: a 2,000-job nightly: NIGHTLY_MODELS models x one target x NIGHTLY_UNITS units
NIGHTLY_MODELS = 20
NIGHTLY_UNITS = 100
#: what the submitter may hold at once: a few in passing, never a growing share of the night
SUBMITTER_BOUND = 4

#: `farm nightly --address` as the CLI runs it (nightly/run.py), in a driver that counts what the
#: submitter holds every 100 finished jobs, and once more while it holds one whole job on purpose
#: (the count must see a document that is there)
NIGHTLY = """
import json, sys
from pathlib import Path

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.nightly.run import run_nightly
from ondevice_farm.nightly.suite import load_suite
from ondevice_farm.profiles import load_profiles
from ondevice_farm.run_reader import iter_job_summaries, iter_whole_jobs
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.simulated.profile import with_simulated
from tests.fleet.held_objects import CountingProgress, held

suite, home, address = load_suite(Path(sys.argv[1])), FarmHome(Path(sys.argv[2])), sys.argv[3]
profiles = with_simulated(load_profiles())
settings = AgentSettings(profiles=profiles, extra={"simulated_units": "1"})


seen = {}


def read_one(store, result):
    seen["ids"] = len({j["job_id"] for j in iter_job_summaries(store, result.run["run_id"])})
    whole = next(iter_whole_jobs(store, result.run["run_id"]))
    seen["holding_one"] = held()
    del whole


progress = CountingProgress(every=100)
result = run_nightly(
    suite, home=home, profiles=profiles, settings=settings, cluster=ClusterConfig(address=address),
    progress=progress, read_stored=read_one,
)
print("RESULT " + json.dumps({
    "finished": progress.done, "status": result.run["status"], "jobs": result.tally.total,
    "ok": result.tally.ok, "submitter": progress.peak, **seen,
}))
"""


def write_big_suite(root: Path, model: Path) -> Path:
    models = []
    for index in range(NIGHTLY_MODELS):  # a model's name is its file's stem
        copy = root / f"m{index:02d}.onnx"
        copy.write_bytes(model.read_bytes())
        models.append(f"  - path: {copy}")
    units = [f"simulated:{name}-{i}" for i in range(UNITS_PER_NODE) for name, _ in NODES][:NIGHTLY_UNITS]
    lines = [
        "name: lab-2000",
        f"devices: [{', '.join(units)}]",
        "targets: [ort/xnnpack]",
        "runs: 100",
        "warmup: 0",
        "repeats: 1",
        "allow_simulated: true",
        "models:",
        *models,
    ]
    suite = root / "lab-2000.yaml"
    suite.write_text("\n".join(lines) + "\n")
    return suite


@pytest.mark.slow
# ~100 s alone on 2 cores; beside the other xdist worker of a CI run it took over 300 s once (before
# the stored trace was cut to two runs: docs/report.md, "Traces")
@pytest.mark.timeout(600)
def test_a_2000_job_nightly_is_stored_whole_and_held_nowhere_whole(lab: Lab, tmp_path: Path) -> None:
    suite = write_big_suite(tmp_path, write_model(tmp_path / "lab.onnx"))
    jobs = NIGHTLY_MODELS * NIGHTLY_UNITS
    done = subprocess.run(
        [sys.executable, "-c", NIGHTLY, str(suite), str(tmp_path / "submitter-home"), lab.cluster.address],
        env=lab.cluster.env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])

    # every job ran on a simulated unit and is in the controller's store once
    assert result["finished"] == jobs and result["status"] == "complete", result
    assert result["jobs"] == result["ids"] == result["ok"] == jobs, result
    # the submitter saw summaries only: no unit's result, a bounded few documents (the count does
    # see one: it found the whole job the driver held on purpose)
    assert 1 <= result["holding_one"]["documents"] <= SUBMITTER_BOUND, result
    assert result["submitter"]["runs"] <= SUBMITTER_BOUND, result
    assert result["submitter"]["documents"] <= SUBMITTER_BOUND, result
    # and once the night is compared, it holds none of tonight's job summaries: the comparison read
    # them a page at a time (nightly/run.py), and the result is a tally
    assert result["holding_one"]["summaries"] <= SUBMITTER_BOUND, result
    assert result["submitter"]["summaries"] <= SUBMITTER_BOUND, result
    # the controller held at most a result per unit plus those being written
    fleet = lab.held()
    assert 1 <= fleet["peak_results"] <= len(NODES) * (1 + UNITS_PER_NODE) + fleet["max_in_flight"], fleet
    assert fleet["peak_results"] < jobs // 10, fleet


# -- a night that survives (issue 35): every check runs a real `farm nightly` and reads the stored
# night back (every planned job exactly once) after a real fault mid-night. In this module, on its
# lab, so that two labs never run at once on a 2-core CI machine; the agent's death is last (n3
# serves no unit after it).

#: how long the night's store is locked: past its 30 s busy timeout (`DEFAULT_BUSY_TIMEOUT_S`)
STORE_LOCKED_S = 35.0


def stored_jobs(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def test_a_night_outlasts_its_store_locked_past_the_busy_timeout(lab: Lab, tmp_path: Path) -> None:
    """Mid-night, another process holds the SQLite store's write lock longer than a write waits
    for it (as a long `farm gc` batch could): the writes of the jobs finishing meanwhile fail once
    and are tried again, so the night ends with every planned job stored exactly once."""
    models = 3
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
    """The submitter (a Ray driver) is SIGSTOPped mid-night for 2.5x the controller's submitter
    timeout (`start_serve`: 4 s): Ray says its driver is alive, so its submission is kept and its
    jobs run on; resumed, it hears them all and the night is stored whole, each job once."""
    models = 3
    store = lab.home / "results.sqlite"
    before = stored_jobs(store)
    night = start_night(lab, blink_suite(tmp_path, "paused", models))
    try:
        wait_for(lambda: stored_jobs(store) >= before + 50, 240, "the night's first jobs stored")
        night.send_signal(signal.SIGSTOP)
        time.sleep(10.0)
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
