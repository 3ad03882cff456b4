"""`farm serve --metrics-adhoc-series N` (or $FARM_METRICS_ADHOC_SERIES) bounds the ad-hoc results
its /metrics exports to the N newest (docs/metrics.md, "Series budget")."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.cli.main import cli
from ondevice_farm.config import FarmHome
from ondevice_farm.store import ResultsStore
from tests.fleet.conftest import only_loopback
from tests.fleet.serve import farm_serve

from .conftest import http_get

HOST_RUN = Path(__file__).resolve().parents[1] / "report" / "fixtures" / "host" / "tinynet_busy_host.json"
UPLOADS = 3


def _store_uploads(farm_home: Path) -> None:
    """UPLOADS ad-hoc runs of a real stored host job, one model each, `upload-{n}` newest last."""
    template = json.loads(HOST_RUN.read_text())["jobs"][0]
    with ResultsStore(FarmHome(farm_home).store_path) as store:
        for n in range(UPLOADS):
            run_id = f"20261206-000000-upload{n}"
            job = copy.deepcopy(template)
            job.update(job_id=f"{run_id}-job", run_id=run_id, finished_at=float(template["finished_at"]) + n)
            job["model"] = {**job["model"], "name": f"upload-{n}"}
            store.start_run(run_id, "submit", {})
            store.add_job(run_id, job)
            store.finish_run(run_id, "complete")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_serve_exports_only_the_newest_adhoc_results_it_is_told(tmp_path: Path) -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    farm_home = tmp_path / "farm"
    _store_uploads(farm_home)
    port = _free_port()
    with farm_serve(tmp_path, farm_home, "--metrics-port", str(port), "--metrics-adhoc-series", "1"):
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    models = {
        sample.labels["model"]
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if family.name == "farm_inference_latency_seconds"
    }
    assert models == {f"upload-{UPLOADS - 1}"}  # of 3, with the default 100: all three


def test_the_bound_is_read_from_the_environment_and_checked_before_anything_starts() -> None:
    # a bad --gc-every stops serve before anything starts: were the variable not read, it stops there
    result = CliRunner().invoke(
        cli, ["serve"], env={"FARM_METRICS_ADHOC_SERIES": "-1", "FARM_GC_EVERY": "soon"}
    )
    assert result.exit_code == 2
    assert "--metrics-adhoc-series" in result.output and "-1" in result.output
