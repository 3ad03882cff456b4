"""Ray token auth and binding as a user meets them: `farm serve` then `farm submit --address` on
one host with nothing exported, a wrong or missing token refused at once in one line, the token
file owner-only, the embedded Ray listening on loopback only.

HOME is a temp dir in each test: the token the embedded Ray creates is not the user's.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.fleet.conftest import only_loopback
from tests.fleet.serve import FARM, clean_env, farm_serve

pytestmark = pytest.mark.slow


@dataclass
class Served:
    process: subprocess.Popen[str]
    address: str
    home: Path
    api_url: str
    farm_home: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    root = tmp_path_factory.mktemp("auth")
    home = root / "user"
    home.mkdir()
    with farm_serve(home, root / "head") as serving:
        yield Served(serving.process, serving.address, home, serving.api_url, root / "head")


def submit(served: Served, home: Path, farm_home: Path, model: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FARM, "submit", str(model), "--devices", "host-cpu", "--runs", "3", "--address", served.address,
         "--json"],
        env=clean_env(home, farm_home),
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip


def runs_through_the_controller(served: Served, farm_home: Path) -> list[str]:
    """`farm runs --address` from a farm directory of its own: the fleet's runs."""
    listing = subprocess.run(
        [FARM, "runs", "--address", served.address, "--json"],
        env=clean_env(served.home, farm_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr[-2000:]
    return [r["run_id"] for r in json.loads(listing.stdout)["runs"]]


def test_serve_then_submit_on_one_host_needs_no_exported_variable(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    token = served.home / ".ray" / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600  # Ray would leave it world-readable
    assert served.address.startswith("127.0.0.1:")
    done = submit(served, served.home, tmp_path / "submitter", tiny_model)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    assert run_id in runs_through_the_controller(served, tmp_path / "elsewhere")


def test_the_embedded_ray_listens_on_loopback_only(served: Served) -> None:
    pids = {served.process.pid} | {p.pid for p in psutil.Process(served.process.pid).children(recursive=True)}
    listening = {
        c.laddr.ip
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }
    assert listening and listening <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}, listening


def stranger_home(tmp_path: Path, token: str | None) -> Path:
    """A HOME holding `token` as its Ray token, or none at all."""
    home = tmp_path / "stranger"
    (home / ".ray").mkdir(parents=True)
    if token is not None:
        (home / ".ray" / "auth_token").write_text(token)
    return home


@pytest.mark.parametrize("token", ["a-token-the-head-never-issued", None])
def test_a_submitter_without_the_right_token_is_refused_at_once_in_one_line(
    served: Served, tmp_path: Path, tiny_model: Path, token: str | None
) -> None:
    home = stranger_home(tmp_path, token)
    began = time.monotonic()
    done = submit(served, home, tmp_path / "farm", tiny_model)
    took_s = time.monotonic() - began
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("farm: error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert f"the Ray head at {served.address} refused this host's authentication token" in errors[0]
    assert "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=" in errors[0]  # what to set, said exactly
    assert took_s < 15  # Ray alone retries for 20 s before "Failed to connect"


def api_submit(
    served: Served, home: Path, farm_home: Path, model: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`farm submit --address http://...`: to the controller's submit API, without Ray."""
    return subprocess.run(
        [FARM, "submit", str(model), "--devices", "host-cpu", "--runs", "3", "--address", served.api_url,
         "--json", *extra],
        env=clean_env(home, farm_home),
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip


def stored_run_ids(served: Served) -> set[str]:
    with sqlite3.connect(served.farm_home / "results.sqlite") as db:
        return {str(row[0]) for row in db.execute("SELECT run_id FROM runs")}


def test_a_submit_over_the_api_runs_on_the_controller_and_lands_in_its_store(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    done = api_submit(served, served.home, tmp_path / "submitter", tiny_model)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["status"] == "complete"
    [job] = document["jobs"]
    assert job["status"] == "ok" and job["device"] == "host-cpu"
    assert job["latency_ms"]["samples"] and len(job["latency_ms"]["samples"]) == 3  # measured on the unit
    assert job["reference"]["status"] == "passed"
    assert "[1/1] host-cpu ort/cpu: ok" in done.stderr  # progress streamed back
    assert document["run_id"] in stored_run_ids(served)  # the controller's store, not the submitter's
    assert not (tmp_path / "submitter" / "results.sqlite").exists()
    assert document["run_id"] in runs_through_the_controller(served, tmp_path / "elsewhere")

    # the model went up once, by hash: a second submit of it sends no bytes
    [blob] = (served.farm_home / "uploads").glob("*/blob")
    before = blob.stat().st_mtime_ns
    again = api_submit(served, served.home, tmp_path / "submitter", tiny_model)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [b.stat().st_mtime_ns for b in (served.farm_home / "uploads").glob("*/blob")] == [before]
    assert json.loads(again.stdout)["run_id"] != document["run_id"]


@pytest.mark.parametrize("token", ["a-token-the-head-never-issued", None])
def test_a_submitter_without_the_right_token_is_refused_by_the_api_in_one_line(
    served: Served, tmp_path: Path, tiny_model: Path, token: str | None
) -> None:
    home = stranger_home(tmp_path, token)
    runs_before = stored_run_ids(served)
    began = time.monotonic()
    done = api_submit(served, home, tmp_path / "farm", tiny_model)
    took_s = time.monotonic() - began
    assert done.returncode == 7, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("farm: error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert f"the farm controller at {served.api_url} refused this host's authentication token" in errors[0]
    assert took_s < 10
    assert stored_run_ids(served) == runs_before
    assert not list((served.farm_home / "uploads").glob(".upload-*"))


@pytest.mark.parametrize(
    ("extra", "exit_code", "says"),
    [
        (("--devices", "pixel9000"), 2, "unknown device 'pixel9000'"),
        (("--tolerance", "atol=banana"), 2, "atol"),
        (("--sustained", "forever"), 2, "forever"),
    ],
)
def test_bad_options_over_the_api_fail_in_one_line_and_store_nothing(
    served: Served, tmp_path: Path, tiny_model: Path, extra: tuple[str, ...], exit_code: int, says: str
) -> None:
    runs_before = stored_run_ids(served)
    done = api_submit(served, served.home, tmp_path / "submitter", tiny_model, *extra)
    assert done.returncode == exit_code, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("farm: error:")]
    assert len(errors) == 1 and says in errors[0], done.stderr[-2000:]
    assert done.stdout == ""
    assert stored_run_ids(served) == runs_before


def test_a_missing_model_fails_before_anything_is_sent(served: Served, tmp_path: Path) -> None:
    done = api_submit(served, served.home, tmp_path / "submitter", tmp_path / "nowhere.onnx")
    assert done.returncode == 3
    assert done.stderr.strip().splitlines()[-1].startswith("farm: error: model not found:")


def test_concurrent_api_submitters_each_get_their_own_run(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    """Two CI runners at once, the same model: one upload kept, two runs, each whole."""
    command = [FARM, "submit", str(tiny_model), "--devices", "host-cpu", "--runs", "5"]
    command += ["--address", served.api_url, "--json"]
    runners = [
        subprocess.Popen(
            command,
            env=clean_env(served.home, tmp_path / f"runner{i}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    documents = []
    for runner in runners:
        stdout, stderr = runner.communicate(timeout=180)
        assert runner.returncode == 0, stderr[-2000:]
        documents.append(json.loads(stdout))
    assert len({d["run_id"] for d in documents}) == 2
    assert all(d["status"] == "complete" and len(d["jobs"]) == 1 for d in documents)
    assert {d["run_id"] for d in documents} <= stored_run_ids(served)


def test_inputs_and_a_reference_model_go_up_with_the_model(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    """`--inputs` and `--reference` name files on the submitter: they are uploaded too, and the
    controller runs on those inputs and compares against that model."""
    import numpy as np

    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.full((1, 64), -0.5, dtype=np.float32))
    reference = tmp_path / "float_reference.onnx"
    reference.write_bytes(tiny_model.read_bytes())  # the same graph under another name
    done = api_submit(
        served,
        served.home,
        tmp_path / "submitter",
        tiny_model,
        "--inputs",
        str(inputs),
        "--reference",
        str(reference),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["settings"]["reference_model"].endswith("float_reference.onnx")
    [job] = document["jobs"]
    assert job["reference"]["status"] == "passed"
    assert "uploading inputs.npz" in done.stderr


def test_runs_show_and_report_read_the_fleets_store_over_the_api(
    served: Served, tmp_path: Path, tiny_model: Path
) -> None:
    """A CI runner that submitted over the API reads the fleet's history the same way: no Ray."""
    done = api_submit(served, served.home, tmp_path / "submitter", tiny_model)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]

    def farm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FARM, *args, "--address", served.api_url],
            env=clean_env(served.home, tmp_path / "reader"),
            capture_output=True,
            text=True,
            timeout=120,
        )

    listing = farm("runs", "--json")
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert run_id in [r["run_id"] for r in json.loads(listing.stdout)["runs"]]
    shown = farm("show", run_id[:-1], "--json")  # a unique prefix
    assert shown.returncode == 0, shown.stderr[-2000:]
    document = json.loads(shown.stdout)
    assert document["run_id"] == run_id and document["status"] == "complete"
    assert document["jobs"][0]["latency_ms"]["samples"]
    latest = farm("show", "latest", "--json")
    assert latest.returncode == 0 and json.loads(latest.stdout)["run_id"] == run_id
    report = farm("report", run_id, "--html", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "r.html").stat().st_size > 0
    missing = farm("show", "nosuchrun", "--json")
    errors = [line for line in missing.stderr.splitlines() if line.startswith("farm: error:")]
    assert missing.returncode not in (0, 70) and len(errors) == 1, missing.stderr[-2000:]
    assert not (tmp_path / "reader").exists()  # nothing local was read or made
    devices = farm("devices")  # a command that needs Ray says so in one line
    assert devices.returncode == 2 and "this command needs Ray" in devices.stderr, devices.stderr[-2000:]
