"""A night of a real lab: nightlies of 3,000 to 30,000 jobs on 1,000 simulated units (issue 34).

    unshare -n sh -c 'ip link set lo up && .venv/bin/python benchmarks/lab_scale.py [--json lab.json]'
    ... benchmarks/lab_scale.py --quick     # a smoke run: 30 units, nightlies of 40 and 120 jobs,
                                            # 2,000 stored jobs

Starts the simulated lab of docs/fleet.md ("Simulated lab"): NODES Ray nodes on loopback
(tests/fleet/cluster.py), a PostgreSQL on loopback (tests/pg_server.py; or --store, an empty
database), `farm serve --store postgresql://...` on the head, one `farm agent` per node serving its
share of UNITS simulated units (one shared DeviceActor per node) whose jobs last a log-normal draw
around JOB_S. Then, for each size of --sizes, `farm nightly --address --allow-simulated` of a suite
of about that many jobs (MODELS copies of one tiny model under distinct names, each on ort/cpu,
ort/xnnpack and ort/nnapi of its own slice of the units, pinned: models x targets x phones, as a
lab's night; --models 0: a copy per three jobs on `simulated`; runs: 100), and measures:

- jobs per second sustained (the run's jobs / its first start to its last finish, from the store),
  against the lab's rate units / JOB_S;
- every job stored once: the run's rows, distinct ids and distinct (model, target, unit asked
  for) == planned;
- store size per job: growth of pg_total_relation_size(jobs, job_parts, runs) / the run's jobs;
- peak RSS per process kind of `farm serve`, the submitter, the agents and every Ray process of
  every node (benchmarks/process_rss.py: each tree sampled every second), its slope against jobs
  and the ratio largest / smallest size (goal: within 1.25x);
- /metrics during the nightly (a scrape every --scrape-every-s): time and series count.

On the largest run: `farm report` (terminal and --html) and `farm show` through the submit API,
wall time and peak RSS (goal: < 30 s and < 1 GiB; not `farm show --json`, which writes every job
whole, one API call per job); series per (model, profile, target) on /metrics
(goal <= 15) and the lab total computed for 40 profiles x 100 models x 3 targets (goal <= 200,000).
Then HISTORY stored jobs (default 1,000,000): the lab's runs copied in SQL with new ids, dated
back over 90 days (benchmarks/lab_history.py), and: scrape time and series count (goal < 1 s),
`farm gc --dry-run` and `farm gc` (default policy) wall time (goal < 5 minutes each).

Figures print as a table (benchmarks/lab_figures.py), each goal's PASS/FAIL beside it, with the
machine's load at the start and the end; --json writes them all. Everything this starts is stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import onnx
import psutil
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab_figures import print_figures, rss_table, series, series_budget
from lab_history import copy_history
from process_rss import MIB, TreeSampler

from tests.fleet.cluster import VENV_BIN, LocalCluster, new_cluster

FARM = str(VENV_BIN / "farm")
TARGETS = ("ort/cpu", "ort/xnnpack", "ort/nnapi")
STORE_TABLES = ("jobs", "job_parts", "runs")


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def tiny_model(path: Path) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "lab", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path.read_bytes()


def node_shares(units: int, nodes: int) -> list[int]:
    """How many of `units` simulated units each node's agent serves."""
    return [units // nodes + (n <= units % nodes) for n in range(1, nodes + 1)]


def unit_names(units: int, nodes: int) -> list[str]:
    """Every simulated unit's selector, the nodes taken in turn (a small night spans them all)."""
    shares = node_shares(units, nodes)
    return [
        f"simulated:n{n}-{i}" for i in range(max(shares)) for n in range(1, nodes + 1) if i < shares[n - 1]
    ]


def write_suite(
    root: Path, name: str, jobs: int, model: bytes, models: int, units: list[str]
) -> tuple[Path, int]:
    """The suite and its planned job count. With `models`, a lab's night: that many models (copies
    under distinct names), each on the ort targets of its slice of the units (pinned,
    `simulated:SERIAL`; the slices wrap around the lab), as many as make about `jobs`, so the
    models and series stay fixed while the jobs grow and every unit takes its share. With
    `models` 0, one model copy per three jobs on the profile (the last trimmed to make the count):
    jobs and series grow together."""
    # (targets, pinned units or None for the suite's `simulated`) per model copy
    entries: list[tuple[tuple[str, ...], list[str] | None]]
    if models:
        per_model = max(1, min(len(units), jobs // (models * len(TARGETS))))
        entries = [
            (TARGETS, [units[(index * per_model + k) % len(units)] for k in range(per_model)])
            for index in range(models)
        ]
    else:
        entries = [
            (TARGETS[: min(len(TARGETS), jobs - index * len(TARGETS))], None)
            for index in range(-(-jobs // len(TARGETS)))
        ]
    folder = root / name
    folder.mkdir(parents=True)
    lines = [f"name: {name}", "devices: [simulated]", "runs: 100", "warmup: 0", "repeats: 1", "models:"]
    for index, (targets, devices) in enumerate(entries):
        path = folder / f"m{index:05d}.onnx"
        path.write_bytes(model)
        lines.append(f"  - path: {path}")
        if devices is not None:
            lines.append(f"    devices: [{', '.join(devices)}]")
        lines.append(f"    targets: [{', '.join(targets)}]")
    suite = root / f"{name}.yaml"
    suite.write_text("\n".join(lines) + "\n")
    return suite, sum(len(targets) * len(devices or [None]) for targets, devices in entries)


def scrape(url: str) -> tuple[float, str]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read().decode()
    return time.perf_counter() - began, body


class Scraper:
    """Scrapes /metrics every `every_s` on a thread (a Prometheus beside the nightly)."""

    def __init__(self, url: str, every_s: float) -> None:
        self.url, self.every_s = url, every_s
        self.times_s: list[float] = []
        self.series = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            began = time.perf_counter()
            try:
                took, body = scrape(self.url)
            except OSError:  # a timed-out scrape is a figure too (its time), not the end of the run
                self.times_s.append(time.perf_counter() - began)
                continue
            self.times_s.append(took)
            self.series = len(series(body))

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class Lab:
    def __init__(self, cluster: LocalCluster, home: Path, store: str) -> None:
        self.cluster, self.home, self.store = cluster, home, store
        self.roots: dict[str, int] = {}
        self.metrics_url = self.api_url = ""

    def env(self) -> dict[str, str]:
        return {**self.cluster.env, "FARM_SIMULATED_DEVICES": "1"}

    def farm(self, *args: str) -> list[str]:
        return [FARM, "--home", str(self.home), "--store", self.store, *args]

    def start(self, units: int, nodes: int, job_s: float) -> None:
        self.cluster.start_head()
        for n in range(2, nodes + 1):
            self.cluster.add_node(f"n{n}", f"127.0.0.{n}")
        self.cluster.wait_nodes(nodes)
        serve = self.cluster.spawn("serve", self.farm("serve", "--address", self.cluster.address,
                                                      "--metrics-port", "0", "--api-port", "0"))  # fmt: skip
        self.roots["farm serve"] = serve.pid
        deadline = time.monotonic() + 180
        while not (self.metrics_url and self.api_url):
            log = self.cluster.log("serve")
            self.metrics_url = next(iter(re.findall(r"metrics on (http://\S+/metrics)", log)), "")
            self.api_url = next(iter(re.findall(r"submit API on (http://\S+?):? ", log)), "")
            if serve.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"farm serve did not start:\n{log[-3000:]}")
            time.sleep(0.5)
        for n, share in enumerate(node_shares(units, nodes), start=1):
            agent = self.cluster.spawn(
                f"agent-n{n}",
                [FARM, "agent", "--address", self.cluster.address, "--node-ip", f"127.0.0.{n}"],
                env={
                    "FARM_HOME": str(self.cluster.root / f"agent-n{n}"),
                    "FARM_AGENT_HOST_SERIAL": f"n{n}",
                    "FARM_SIMULATED_DEVICES": str(share),
                    "FARM_AGENT_SIMULATED_PREFIX": f"n{n}",
                    "FARM_AGENT_SIMULATED_JOB_S": str(job_s),
                },
            )
            self.roots[f"farm agent n{n}"] = agent.pid
        for index, node in enumerate(self.cluster.nodes):
            self.roots[f"ray start n{index + 1}"] = node.process.pid
        deadline = time.monotonic() + 300
        while self.units_up() < units:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.units_up()} of {units} simulated units up after 300 s")
            time.sleep(2)

    def units_up(self) -> int:
        body = scrape(self.metrics_url)[1]
        return sum(
            line.startswith("farm_device_up{") and 'device="simulated"' in line and line.endswith(" 1.0")
            for line in body.splitlines()
        )

    def timed(self, args: list[str], interval_s: float = 0.1) -> dict[str, Any]:
        """Runs `args` to its end, its tree sampled: wall seconds, peak RSS, exit status (and
        the end of its log where it failed: the benchmark goes on)."""
        log_path = self.cluster.root / "command.log"
        with open(log_path, "wb") as log:
            began = time.perf_counter()
            process = subprocess.Popen(args, env=self.env(), stdout=subprocess.DEVNULL, stderr=log)
            with TreeSampler({"command": process.pid}, interval_s) as sampler:
                code = process.wait(timeout=3600)
            wall_s = time.perf_counter() - began
        figures: dict[str, Any] = {"wall_s": wall_s, "peak_rss_mib": sampler.peaks_mib()["command"]}
        figures["exit"] = code
        if code != 0:
            figures["error"] = log_path.read_text(errors="replace")[-3000:]
            print(f"{' '.join(args[4:])} exited {code}:\n{figures['error']}", flush=True)
        return figures


def store_bytes(db: Any) -> int:
    return int(sum(db.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0] for t in STORE_TABLES))


def nightly(
    lab: Lab, db: Any, root: Path, jobs: int, model: bytes, args: argparse.Namespace
) -> dict[str, Any]:
    name = f"lab-{jobs}"
    suite, planned = write_suite(root, name, jobs, model, args.models, unit_names(args.units, args.nodes))
    before = store_bytes(db)
    command = lab.farm("nightly", str(suite), "--address", lab.cluster.address, "--allow-simulated")
    began = time.perf_counter()
    with open(root / f"{name}.log", "wb") as log, TreeSampler(lab.roots, args.rss_every_s) as sampler:
        process = subprocess.Popen(command, env=lab.env(), stdout=log, stderr=subprocess.STDOUT)
        sampler.add_root("farm nightly (submitter)", process.pid)
        with Scraper(lab.metrics_url, args.scrape_every_s) as scraper:
            code = process.wait(timeout=600 + 5 * planned * args.job_s / args.units)
    wall_s = time.perf_counter() - began
    if code not in (0, 1):  # 1: a regression or every job failed, still a stored run
        raise RuntimeError(f"farm nightly exited {code}:\n{(root / f'{name}.log').read_text()[-3000:]}")
    run_id, stored, ids, pairs, ok_jobs, first, last = db.execute(
        "SELECT r.run_id, count(j.job_id), count(DISTINCT j.job_id),"
        " count(DISTINCT (j.model_name, j.target, j.requested)),"
        " count(*) FILTER (WHERE j.status = 'ok'), min(j.started_at), max(j.finished_at)"
        " FROM runs r JOIN jobs j ON j.run_id = r.run_id WHERE r.suite = %s GROUP BY r.run_id",
        (name,),
    ).fetchone()
    return {
        "jobs": planned,
        "suite": name,
        "run_id": run_id,
        "nightly_wall_s": wall_s,
        "stored_once": stored == ids == pairs == planned,
        "stored": stored,
        "ok": ok_jobs,
        "jobs_per_s": stored / max(last - first, 1e-9),
        "lab_rate_jobs_per_s": args.units / args.job_s,
        "store_bytes_per_job": (store_bytes(db) - before) / max(stored, 1),
        "rss_peak_mib": sampler.peaks_mib(),
        "processes": sampler.counts(),
        "rss_samples": sampler.samples,
        "scrapes": len(scraper.times_s),
        "scrape_median_s": statistics.median(scraper.times_s) if scraper.times_s else None,
        "scrape_max_s": max(scraper.times_s, default=None),
        "scrape_series": scraper.series,
    }


def history(lab: Lab, db: Any, runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    copies, load_s = copy_history(
        db, [r["suite"] for r in runs], args.history, args.history_days, args.history_parts_copies
    )
    rows = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
    first_s, body = scrape(lab.metrics_url)
    warm = [scrape(lab.metrics_url)[0] for _ in range(5)]
    figures: dict[str, Any] = {
        "rows": rows, "copies": copies, "bulk_load_s": load_s, "method": "SQL copies (lab_history.py)",
        "parts_rows": db.execute("SELECT count(DISTINCT job_id) FROM job_parts").fetchone()[0],
        "store_bytes": store_bytes(db),
        "scrape_first_s": first_s, "scrape_median_s": statistics.median(warm),
        "series": len(series(body)),
    }  # fmt: skip
    for name, extra in (("gc_dry_run", ["--dry-run"]), ("gc", [])):
        began = time.perf_counter()
        done = subprocess.run(lab.farm("gc", *extra, "--json"), env=lab.env(), capture_output=True, text=True)
        figures[f"{name}_s"] = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"farm gc {' '.join(extra)} exited {done.returncode}: {done.stderr[-3000:]}")
        removals = json.loads(done.stdout)["removals"]
        figures[f"{name}_removals"] = sum(1 for r in removals if r["kind"] == "run")
    figures["rows_after_gc"] = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
    return figures


def keep_partial(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """What is measured survives a later step's failure: one JSON line per step, beside --json."""
    if args.json:
        with args.json.with_suffix(".partial.jsonl").open("a") as out:
            out.write(json.dumps(figures, default=str) + "\n")


def measure(args: argparse.Namespace, store: str, root: Path) -> dict[str, Any]:
    import psycopg

    cluster = new_cluster()
    lab = Lab(cluster, root / "lab", store)
    result: dict[str, Any] = {"sizes": []}
    try:
        began = time.perf_counter()
        lab.start(args.units, args.nodes, args.job_s)
        result["lab_start_s"] = time.perf_counter() - began
        print(f"lab up: {args.units} simulated units on {args.nodes} nodes in {result['lab_start_s']:.0f} s,"
              f" load {load()}", flush=True)  # fmt: skip
        model = tiny_model(root / "tiny.onnx")
        with psycopg.connect(store, autocommit=True) as db:
            for jobs in sorted(args.sizes):
                run = nightly(lab, db, root, jobs, model, args)
                result["sizes"].append(run)
                print(f"nightly of {jobs} jobs: {run['nightly_wall_s']:.0f} s,"
                      f" {run['jobs_per_s']:.2f} jobs/s, load {load()}", flush=True)  # fmt: skip
                keep_partial(args, {k: v for k, v in run.items() if k != "rss_samples"})
            largest = result["sizes"][-1]["run_id"]
            result["reading"] = {}
            html = root / "report.html"
            for name, command in (
                ("farm report", ["report", largest]),
                ("farm report --html", ["report", largest, "--html", str(html)]),
                ("farm show", ["show", largest]),
            ):
                result["reading"][name] = lab.timed(
                    [FARM, "--debug", "--home", str(lab.home), *command, "--address", lab.api_url]
                )
            result["series_budget"] = series_budget(scrape(lab.metrics_url)[1])
            keep_partial(args, {"reading": result["reading"], "series_budget": result["series_budget"]})
            if args.history > 0:
                result["history"] = history(lab, db, result["sizes"], args)
                keep_partial(args, {"history": result["history"]})
        result["rss"] = rss_table(result["sizes"])
    finally:
        cluster.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1000, help="simulated units in all")
    parser.add_argument("--nodes", type=int, default=3, help="Ray nodes on loopback")
    parser.add_argument("--job-s", type=float, default=60.0, help="a simulated job's median seconds")
    parser.add_argument(
        "--sizes", type=lambda s: [int(v) for v in s.split(",")], default=[3000, 10000, 30000]
    )
    parser.add_argument(
        "--models", type=int, default=10,
        help="models of each night, each on pinned units (0: a model per three jobs, on the profile)",
    )  # fmt: skip
    parser.add_argument("--history", type=int, default=1_000_000, help="stored jobs for the scrape and gc")
    parser.add_argument("--history-days", type=float, default=90.0, help="how far back the copies go")
    parser.add_argument(
        "--history-parts-copies", type=int, default=1, help="copies that take the jobs' bulky parts along"
    )
    parser.add_argument("--rss-every-s", type=float, default=1.0)
    parser.add_argument("--scrape-every-s", type=float, default=15.0)
    parser.add_argument("--store", help="an empty PostgreSQL database (default: a server started here)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 30 units, nightlies of 40 and 120 jobs"
    )
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    if args.quick:
        args.units, args.job_s, args.sizes, args.history = 30, 0.5, [40, 120], 2000
        args.models = min(args.models, 2)
        args.scrape_every_s = 2.0

    from tests.pg_server import postgres_server

    result: dict[str, Any] = {
        "args": {k: v for k, v in vars(args).items() if k != "json" and k != "store"},
        "machine": {"cpus": os.cpu_count(), "memory_gib": psutil.virtual_memory().total / 2**30},
        "load_start": load(),
    }
    print(f"load average (1, 5, 15 min) at the start: {result['load_start']}; {os.cpu_count()} CPUs,"
          f" {result['machine']['memory_gib']:.0f} GiB", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="farm-lab-") as tmp:
        if args.store:
            result.update(measure(args, args.store, Path(tmp)))
        else:
            with postgres_server() as server:
                result.update(measure(args, server.new_database(), Path(tmp)))
    result["load_end"] = load()
    print_figures(result)
    print(f"\nload average at the end: {result['load_end']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"(RSS sampled every {args.rss_every_s} s; 1 MiB = {MIB} bytes)")


if __name__ == "__main__":
    main()
