"""A plain `farm submit` beside a running `farm serve` (same farm directory, nothing exported)
goes to that controller's submit API instead of starting Ray: said in one stderr line, and
without importing Ray; `--embedded` forces the embedded path; a stale record is ignored, said in one line.

HOME is a temp dir: the token the embedded Ray creates is not the user's.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ondevice_farm.api.local_controller import CONTROLLER_FILE
from tests.fleet.conftest import only_loopback
from tests.fleet.serve import FARM, clean_env, farm_serve
from tests.module_probe import CLI_PROBE

pytestmark = pytest.mark.slow

USED = "submitting to the farm controller at"


@dataclass
class Served:
    process: subprocess.Popen[str]
    api_url: str
    home: Path
    farm_home: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    root = tmp_path_factory.mktemp("local-controller")
    home = root / "user"
    home.mkdir()
    with farm_serve(home, root / "farm") as serving:
        yield Served(serving.process, serving.api_url, home, root / "farm")
    # stopped as Ctrl-C stops it: its record goes with it, so no later submit finds it stale
    assert serving.process.returncode is not None
    assert not (root / "farm" / CONTROLLER_FILE).exists(), "farm serve left its record behind"


def plain_submit(
    home: Path, farm_home: Path, model: Path, *args: str, modules: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`farm submit`; with `modules`, through CLI_PROBE, which writes there what it imported."""
    command = [FARM] if modules is None else [sys.executable, "-c", CLI_PROBE, str(modules)]
    return subprocess.run(
        [*command, "submit", str(model), "--devices", "host-cpu", "--runs", "3", "--json", *args],
        env=clean_env(home, farm_home),
        capture_output=True,
        text=True,
        timeout=180,
    )


def stored_runs(farm_home: Path) -> set[str]:
    with sqlite3.connect(farm_home / "results.sqlite") as db:
        return {row[0] for row in db.execute("SELECT run_id FROM runs")}


def test_serve_records_where_its_api_listens(served: Served) -> None:
    record = json.loads((served.farm_home / CONTROLLER_FILE).read_text())
    assert record["url"] == served.api_url
    assert record["pid"] == served.process.pid
    token = (served.home / ".ray" / "auth_token").read_text().strip()
    assert token not in json.dumps(record)


def test_a_plain_submit_uses_the_running_controller(served: Served, tiny_model: Path, tmp_path: Path) -> None:
    first = plain_submit(served.home, served.farm_home, tiny_model)  # uploads the model once
    assert first.returncode == 0, first.stderr[-3000:]
    modules = tmp_path / "modules.json"
    second = plain_submit(served.home, served.farm_home, tiny_model, modules=modules)
    assert second.returncode == 0, second.stderr[-3000:]
    said = [line for line in second.stderr.splitlines() if USED in line]
    assert said == [f"farm: {USED} {served.api_url} (`farm serve`, pid {served.process.pid}); "
                    "--embedded runs it here instead"]  # fmt: skip
    # the API path imports no Ray (a time bound said so until a loaded CI machine took 4.2 s for it)
    imported = json.loads(modules.read_text())
    assert "ray" not in imported and not any(m.startswith("ray.") for m in imported), "not the API path"
    document = json.loads(second.stdout)
    assert document["jobs"][0]["status"] == "ok"
    assert document["run_id"] in stored_runs(served.farm_home)


def test_embedded_forces_the_embedded_path(served: Served, tiny_model: Path) -> None:
    done = plain_submit(served.home, served.farm_home, tiny_model, "--embedded")
    assert done.returncode == 0, done.stderr[-3000:]
    assert USED not in done.stderr
    assert json.loads(done.stdout)["run_id"] in stored_runs(served.farm_home)


def test_a_stale_record_is_ignored_in_one_line(served: Served, tiny_model: Path, tmp_path: Path) -> None:
    """A record left by a `farm serve` that was killed (its pid gone), pointing at an API that
    still answers (this module's): the pid decides, the submit runs embedded."""
    farm_home = tmp_path / "farm"
    farm_home.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    record = json.loads((served.farm_home / CONTROLLER_FILE).read_text())
    record.update(pid=gone.pid, store=str((farm_home / "results.sqlite").resolve()))
    (farm_home / CONTROLLER_FILE).write_text(json.dumps(record))
    done = plain_submit(served.home, farm_home, tiny_model)
    assert done.returncode == 0, done.stderr[-3000:]
    assert USED not in done.stderr
    said = [line for line in done.stderr.splitlines() if "ignoring the stale" in line]
    assert len(said) == 1 and "process is gone" in said[0]
    assert json.loads(done.stdout)["run_id"] in stored_runs(farm_home)


def test_a_model_with_external_data_goes_with_its_data(served: Served, tmp_path: Path) -> None:
    """One tar of the model and its data files over the API; the controller's job loads it and
    matches the reference, under the same identity the submitter computes."""
    from ondevice_farm.artifacts import sha256_path
    from tests.core.test_external_data import matmul_model

    model = matmul_model(tmp_path / "exported")
    done = plain_submit(served.home, served.farm_home, model)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mm.onnx and its external data (as one tar)" in done.stderr
    document = json.loads(done.stdout)
    assert document["model"]["sha256"] == sha256_path(model)
    [job] = document["jobs"]
    assert job["status"] == "ok", job
    assert job["reference"]["status"] == "passed", job["reference"]
