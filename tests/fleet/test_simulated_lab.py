"""A simulated lab: ~100 simulated units over three Ray nodes on loopback, one `farm agent` per node
and `farm serve` on the head, driven by the real `farm nightly` (docs/fleet.md, "Simulated lab").

Checks: a node's simulated units share one DeviceActor process (counted in each node's process
tree: Ray titles an actor's process `ray::DeviceActorImpl...`); a nightly over them runs on units
of every node and stores, per job, a synthetic result that went through the analysis (a 200-op
profile with CPU fallbacks, 100 samples, outputs compared with the reference); a 2,000-job nightly
over 100 of them is stored whole while neither the submitter nor the controller ever holds more
than a bounded few job documents (counted, not timed); and a nightly on simulated units is refused
unless asked for.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import psutil
import pytest
from onnx import TensorProto, helper

from tests.fleet.cluster import VENV_BIN, LocalCluster, Node, new_cluster
from tests.fleet.conftest import ask_probe, only_loopback, probe_units, start_probe, start_serve, wait_for

ROOT = Path(__file__).resolve().parents[2]
NODES = (("n1", "127.0.0.1"), ("n2", "127.0.0.2"), ("n3", "127.0.0.3"))
UNITS_PER_NODE = 34
JOB_S = 0.3
#: Ray titles an actor's worker process `ray::<class>` (`ray::<class>.<method>` while it runs one)
ACTOR_TITLE = "ray::DeviceActorImpl"


@dataclass
class Lab:
    cluster: LocalCluster
    home: Path
    nodes: dict[str, Node]
    probe: subprocess.Popen[str]
    #: each node's `farm agent` process
    agents: dict[str, subprocess.Popen[bytes]]

    def units(self) -> list[dict[str, Any]]:
        return probe_units(self.probe)

    def held(self) -> dict[str, int]:
        """What the fleet holds of units' results, now and at most so far (controller/job_writer.py)."""
        result: dict[str, int] = ask_probe(self.probe, "held")
        return result

    def farm(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        try:
            return self.cluster.farm(
                "--home", str(self.home), *args, timeout_s=timeout_s, env={"FARM_SIMULATED_DEVICES": "1"}
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
            raise AssertionError(f"farm {args[0]} ran past {timeout_s}s:\n{(stderr or '')[-3000:]}") from None


def lab_env(root: Path, name: str) -> dict[str, str]:
    return {
        "FARM_HOME": str(root / f"home-{name}"),
        "FARM_AGENT_HOST_SERIAL": name,
        "FARM_SIMULATED_DEVICES": str(UNITS_PER_NODE),
        "FARM_AGENT_SIMULATED_PREFIX": name,
        "FARM_AGENT_SIMULATED_JOB_S": str(JOB_S),
        "FARM_AGENT_SIMULATED_JOB_SPREAD": "0.2",
    }


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    cluster = new_cluster()
    try:
        cluster.start_head()
        nodes = {"n1": cluster.nodes[0]}
        nodes.update({name: cluster.add_node(name, ip) for name, ip in NODES[1:]})
        cluster.wait_nodes(len(NODES))
        home = cluster.root / "home"
        start_serve(cluster, home)
        agents = {
            name: cluster.spawn(
                f"agent-{name}",
                [str(VENV_BIN / "farm"), "agent", "--address", cluster.address, "--node-ip", ip],
                env=lab_env(cluster.root, name),
            )
            for name, ip in NODES
        }
        probe = start_probe(cluster)
        state = Lab(cluster, home, nodes, probe, agents)
        expected = len(NODES) * (1 + UNITS_PER_NODE)
        wait_for(lambda: sum(1 for u in state.units() if u["up"]) == expected, 120, f"{expected} units up")
        yield state
    finally:
        cluster.stop()


def device_actor_pids(node: Node) -> list[int]:
    pids = []
    for child in psutil.Process(node.process.pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if title.startswith(ACTOR_TITLE):
            pids.append(child.pid)
    return pids


def device_actor_processes(node: Node) -> int:
    return len(device_actor_pids(node))


def test_a_nodes_simulated_units_share_one_actor_process(lab: Lab) -> None:
    simulated = [u for u in lab.units() if u["name"].startswith("simulated:")]
    assert len(simulated) == len(NODES) * UNITS_PER_NODE
    # Ray starts an actor's process after its handle is registered: wait for each node's first two
    wait_for(lambda: all(device_actor_processes(n) >= 2 for n in lab.nodes.values()), 90, "actor processes")
    for name, node in lab.nodes.items():
        # the node's host unit has an actor of its own; its 34 simulated units one between them
        assert device_actor_processes(node) == 2, name


def write_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "lab", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


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
    model = write_model(tmp_path / "m.onnx")
    paths = []
    for index in range(models):
        copy = tmp_path / f"b{index:02d}.onnx"
        copy.write_bytes(model.read_bytes())
        paths.append(f"  - path: {copy}")
    suite = tmp_path / "blink.yaml"
    lines = [
        "name: blink", "devices: ['simulated:*']", "targets: [ort/xnnpack]", "runs: 100", "warmup: 0",
        "repeats: 1", "allow_simulated: true", "models:", *paths,
    ]  # fmt: skip
    suite.write_text("\n".join(lines) + "\n")
    store = lab.home / "results.sqlite"
    before = stored_jobs(store)
    command = ["nightly", str(suite), "--address", lab.cluster.address, "--json"]
    night = subprocess.Popen(
        [str(VENV_BIN / "farm"), "--home", str(lab.home), *command],
        env={**lab.cluster.env, "FARM_SIMULATED_DEVICES": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: stored_jobs(store) >= before + 50, 240, "the night's first jobs stored")
        holder = sqlite3.connect(store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        locked_at = stored_jobs(store)
        time.sleep(STORE_LOCKED_S)
        assert stored_jobs(store) == locked_at  # nothing was written while the lock was held
        holder.execute("ROLLBACK")
        holder.close()
        stdout, stderr = night.communicate(timeout=400)
    finally:
        if night.poll() is None:
            night.kill()
            night.wait()
    assert night.returncode == 0, stderr[-3000:]
    run_id = json.loads(stdout)["run_id"]
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT job_id, model_name, unit, status FROM jobs WHERE run_id=?", (run_id,)
        ).fetchall()
    units = simulated_units(lab)
    assert len(rows) == models * len(units) and len({r[0] for r in rows}) == len(rows)
    assert {(r[1], r[2]) for r in rows} == {(f"b{i:02d}", u) for i in range(models) for u in units}
    assert {r[3] for r in rows} == {"ok"}
    assert "does not take writes" in (lab.cluster.root / "serve.log").read_text(errors="replace")


def write_every_unit_suite(path: Path, model: Path) -> Path:
    lines = [
        "name: every-unit",
        "devices: ['simulated:*']",
        "targets: [ort/xnnpack]",
        "runs: 100",
        "warmup: 0",
        "repeats: 1",
        "allow_simulated: true",
        "models:",
        f"  - path: {model}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def night_on_every_unit(lab: Lab, tmp_path: Path, timeout_s: float) -> tuple[int, list[dict[str, Any]]]:
    """`farm nightly` over `simulated:*`: its exit code and every job it stored."""
    suite = write_every_unit_suite(tmp_path / "every.yaml", write_model(tmp_path / "every.onnx"))
    done = lab.farm("nightly", str(suite), "--address", lab.cluster.address, "--json", timeout_s=timeout_s)
    assert done.stdout, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    shown = lab.farm("show", run_id, "--json", "--jobs", "1000", "--address", lab.cluster.address)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return done.returncode, json.loads(shown.stdout)["jobs"]


def simulated_units(lab: Lab) -> set[str]:
    return {u["name"].split(":", 1)[1] for u in lab.units() if u["name"].startswith("simulated:")}


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
