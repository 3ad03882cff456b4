"""The deploy kit against a real Prometheus on loopback, scraping the exporter over a store of
real host-cpu results: every dashboard query and every rule returns data."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ondevice_farm.config import FarmHome
from ondevice_farm.metrics.disk import DiskUsage
from ondevice_farm.metrics.server import MetricsServer, start_metrics_server
from ondevice_farm.store import ResultsStore

from .conftest import (
    DEPLOY,
    SUITE,
    HostFleet,
    RealRun,
    binary,
    file_as_nightly,
    free_port,
    http_get,
    wait_until_ready,
)
from .promql import matcher_labels, selectors, variables_used, with_all_values

DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
RULES = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())
DATA_TIMEOUT_S = 30.0
#: the test's Prometheus scrapes and evaluates every second, so the suite stays fast
TEST_INTERVAL = "1s"


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        status, body = http_get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", f"{expr}: {answer}"
        result = answer["data"]["result"]
        return result if answer["data"]["resultType"] == "vector" else [{"value": result}]

    def get(self, path: str) -> Any:
        status, body = http_get(self.url + path)
        assert status == 200, body
        return json.loads(body)["data"]


def _rules() -> list[dict[str, Any]]:
    return [rule for group in RULES["groups"] for rule in group["rules"]]


def _panel_queries() -> list[tuple[str, str]]:
    return [
        (f"{path.name}: {panel['title']}", target["expr"])
        for path in DASHBOARDS
        for panel in json.loads(path.read_text())["panels"]
        for target in panel.get("targets", [])
    ]


def _test_config(directory: Path, metrics_port: int) -> Path:
    """The shipped prometheus.yml and rules.yml, scraping the test's exporter every second."""
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval=TEST_INTERVAL, evaluation_interval=TEST_INTERVAL)
    (farm_job,) = [job for job in config["scrape_configs"] if job["job_name"] == "farm"]
    farm_job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    config["scrape_configs"] = [farm_job]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())
    for group in rules["groups"]:
        group["interval"] = TEST_INTERVAL
    (directory / config["rule_files"][0]).write_text(yaml.safe_dump(rules))
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, real_run: RealRun, generation_run: RealRun
) -> Iterator[Prometheus]:
    executable = binary("prometheus", "prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    store_path = directory / "results.sqlite"
    with ResultsStore(store_path) as store:
        store.start_run(real_run.document["run_id"], "submit", {})
        store.add_job(real_run.document["run_id"], real_run.job)
        store.finish_run(real_run.document["run_id"], "complete")
        file_as_nightly(store, real_run.job)
        store.start_run(generation_run.document["run_id"], "submit", {})
        store.add_job(generation_run.document["run_id"], generation_run.job)
        store.finish_run(generation_run.document["run_id"], "complete")
    fleet = HostFleet()
    server: MetricsServer | None = None
    process: subprocess.Popen[bytes] | None = None
    try:
        # as `farm serve` does: the farm directory's disk use too (its alerts read those series)
        server = start_metrics_server(store_path, port=0, fleet=fleet, disk=DiskUsage(FarmHome(directory)))
        port = free_port()
        process = subprocess.Popen(
            [
                executable,
                f"--config.file={_test_config(directory, server.port)}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(directory / "prometheus.log").open("wb"),
        )
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(f"{url}/-/ready", process)
        api = Prometheus(url)
        recorded = [rule["record"] for rule in _rules() if "record" in rule]
        deadline = time.monotonic() + DATA_TIMEOUT_S
        while not all(api.query(name) for name in recorded) and time.monotonic() < deadline:
            time.sleep(0.25)
        yield api
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if server is not None:
            server.stop()
        fleet.close()


def test_prometheus_holds_the_measured_values(prometheus: Prometheus, real_run: RealRun) -> None:
    (sample,) = prometheus.query(
        'farm_inference_latency_seconds{job="farm",model="tinynet",device="host-cpu",target="ort/cpu",quantile="0.5"}'
    )
    assert float(sample["value"][1]) == pytest.approx(real_run.job["latency_ms"]["p50"] / 1000)
    (nightly,) = prometheus.query(f'farm_last_nightly_timestamp_seconds{{suite="{SUITE}"}}')
    assert time.time() - float(nightly["value"][1]) < 600


def test_the_generation_panels_show_the_generation_job(
    prometheus: Prometheus, generation_run: RealRun
) -> None:
    job = generation_run.job
    series = f'{{model="{job["model"]["name"]}",device="host-cpu",target="ort/cpu"}}'
    (ttft,) = prometheus.query(f"farm_generation_ttft_seconds{series}")
    assert float(ttft["value"][1]) == pytest.approx(job["generation"]["ttft_ms"]["median"] / 1000)
    (decode,) = [
        t["expr"] for t in _panel("Generation: decode tokens/s (from the median token latency)")["targets"]
    ]
    (rate,) = prometheus.query(with_all_values(decode))  # the generation job's only: tinynet has no TTFT
    assert rate["metric"]["model"] == job["model"]["name"]
    assert float(rate["value"][1]) == pytest.approx(1000 / job["latency_ms"]["p50"])
    # a fixed graph's job has no generation series
    assert not prometheus.query('farm_generation_ttft_seconds{model="tinynet"}')


@pytest.mark.parametrize(("panel", "expr"), _panel_queries(), ids=[p for p, _ in _panel_queries()])
def test_every_dashboard_panel_returns_data(prometheus: Prometheus, panel: str, expr: str) -> None:
    assert prometheus.query(with_all_values(expr)), f"{panel}: no data for {expr}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_every_dashboard_variable_has_values(prometheus: Prometheus, path: Path) -> None:
    for variable in json.loads(path.read_text())["templating"]["list"]:
        query = variable["query"]["query"]
        assert query.startswith("label_values(") and query.endswith(")"), query
        selector, label = query[len("label_values(") : -1].rsplit(",", 1)
        values = prometheus.get(
            f"/api/v1/label/{label.strip()}/values?"
            + urllib.parse.urlencode({"match[]": with_all_values(selector)})
        )
        assert values, f"{path.name}: variable ${variable['name']} has no values ({query})"


@pytest.mark.parametrize("rule", [r for r in _rules() if "record" in r], ids=lambda r: r["record"])
def test_every_recording_rule_returns_data(prometheus: Prometheus, rule: dict[str, Any]) -> None:
    assert prometheus.query(rule["record"]), f"{rule['record']} recorded nothing from {rule['expr']}"


@pytest.mark.parametrize("rule", [r for r in _rules() if "alert" in r], ids=lambda r: r["alert"])
def test_alerts_are_quiet_in_a_healthy_farm_and_read_real_series(
    prometheus: Prometheus, rule: dict[str, Any]
) -> None:
    """An alert's expression is empty while the farm is healthy, so 'returns data' is asked of
    each series selector inside it; that the alert fires is promtool's unit test."""
    assert prometheus.query(rule["expr"]) == [], f"{rule['alert']} fires in a healthy farm"
    for selector in selectors(rule["expr"]):
        # a selector of the unhealthy value (state="failed") is empty here: its metric, with the
        # labels it matches on, is not
        series = prometheus.query(selector) or prometheus.query(selector.split("{")[0])
        assert series, f"{rule['alert']}: {selector} has no data"
        assert all(matcher_labels(selector) <= set(s["metric"]) for s in series), selector


def test_every_rule_evaluates_without_error(prometheus: Prometheus) -> None:
    groups = prometheus.get("/api/v1/rules")["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert set(rules) == {r.get("record") or r.get("alert") for r in _rules()}
    assert {name: r["health"] for name, r in rules.items() if r["health"] != "ok"} == {}
    assert prometheus.get("/api/v1/alerts")["alerts"] == []


def test_panel_queries_use_only_defined_variables() -> None:
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        defined = {v["name"] for v in dashboard["templating"]["list"]}
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                assert variables_used(target["expr"]) <= defined, (path.name, panel["title"])


@pytest.mark.parametrize(
    "args",
    [
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "rules.yml"],
        ["test", "rules", "rules_test.yml"],
    ],
    ids=["check-config", "check-rules", "test-rules"],
)
def test_promtool(args: list[str]) -> None:
    done = subprocess.run(
        [binary("promtool", "prometheus"), *args],
        cwd=DEPLOY / "prometheus",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _panel(title: str) -> dict[str, Any]:
    (panel,) = [
        p for path in DASHBOARDS for p in json.loads(path.read_text())["panels"] if p["title"] == title
    ]
    return dict(panel)


def test_the_sustained_and_energy_panels_show_the_real_run(prometheus: Prometheus, real_run: RealRun) -> None:
    """The real run's sustained phase as its one exported figure (steady state over the first
    span: no window series), and the energy per inference, each equal to the job document's."""
    sustained = real_run.job["sustained"]
    assert len(sustained["windows"]) >= 3  # windows in the store, none in Prometheus
    assert not prometheus.query('{__name__=~"farm_.+", window!=""}')
    (slowdown,) = [t["expr"] for t in _panel("Sustained slowdown")["targets"]]
    (ratio,) = [s for s in prometheus.query(with_all_values(slowdown)) if s["metric"]["model"] == "tinynet"]
    assert float(ratio["value"][1]) == pytest.approx(sustained["summary"]["slowdown"])
    (timed_energy,) = (t["expr"] for t in _panel("Energy per inference")["targets"])
    # the timed runs' figure, from the fixture's scripted RAPL counter, idle baseline subtracted
    (timed,) = prometheus.query(with_all_values(timed_energy))
    assert timed["metric"]["source"] == "estimated" and real_run.job["energy"]["method"].startswith("RAPL ")
    assert float(timed["value"][1]) == pytest.approx(real_run.job["energy"]["mj_per_inference"] / 1000)
    (warm,) = [t["expr"] for t in _panel("Session load: first and warm")["targets"] if "warm" in t["expr"]]
    # the generation job loads its folder warm too: this panel shows both, the real run's is tinynet's
    (warm_sample,) = [s for s in prometheus.query(with_all_values(warm)) if s["metric"]["model"] == "tinynet"]
    assert float(warm_sample["value"][1]) == pytest.approx(real_run.job["warm_load_ms"] / 1000)
