"""A plain `farm submit` beside a running `farm serve` is a thin client: it uploads the model, reads
the run back and prints it, and imports nothing heavy to do so (issue 39: importing onnx, and
through it ml_dtypes, to look for external data files doubled the warm submit's 0.25-0.39 s).

The real CLI runs in a fresh interpreter against a submit API on loopback whose service runs
nothing and answers a recorded run of the same model (no Ray anywhere); the interpreter writes the
modules it loaded as it exits. The first submit may read the model's graph for the slowest-kernels
table (and keeps it beside the model); the second, the warm one a user repeats, must not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.api.local_controller import CONTROLLER_FILE, new_record, record_controller
from ondevice_farm.api.server import ApiServer, start_api_server
from ondevice_farm.api.wire import (
    EVENT_DONE,
    EVENT_JOB_FINISHED,
    EVENT_JOBS_STARTED,
    EVENT_STAGE,
    SubmissionBody,
    event_line,
)
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.ray_auth import TOKEN_VAR
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR
from tests.module_probe import CLI_PROBE

REPO = Path(__file__).resolve().parents[2]
TINYNET = REPO / "examples" / "tinynet.onnx"
#: the stored document of a real host run of examples/tinynet.onnx (its README says how it was made)
RECORDED_RUN = REPO / "tests" / "report" / "fixtures" / "host" / "tinynet_busy_host.json"
TOKEN = "thin-t0ken"
#: what a thin client must not import (the top-level packages; any submodule counts)
HEAVY = ("onnx", "onnxruntime", "ml_dtypes", "ray", "torch", "numpy", "scipy", "coremltools", "pandas")
#: the line `farm submit` says when it uses the local controller (cli/submit.py)
USED = "submitting to the farm controller at"


class RecordedRunService:
    """Runs nothing: answers each submission with the recorded run, as a controller streams it."""

    def __init__(self, blobs: BlobStore, artifacts: ArtifactStore) -> None:
        self.blobs = blobs
        self.artifacts = artifacts
        self.bodies: list[SubmissionBody] = []
        self.lock = threading.Lock()

    def run(self, body: SubmissionBody, emit: Any, stop: threading.Event) -> None:
        with self.lock:
            self.bodies.append(body)
            # what a controller does with the upload (api/submissions.py): the model (beside its
            # data files, unpacked) into the farm's artifact store
            ref = body.model
            if ref.external_data:
                model = self.blobs.path(ref.sha256, f"{ref.name}.with-data", tree=True) / ref.name
            else:
                model = self.blobs.path(ref.sha256, ref.name)
            sha, stored = self.artifacts.put(model)
        document = json.loads(RECORDED_RUN.read_text(encoding="utf-8"))
        document["model"].update(path=str(stored), sha256=sha)
        emit(event_line(EVENT_STAGE, text="compiling"))
        emit(event_line(EVENT_JOBS_STARTED, total=len(document["jobs"])))
        for job in document["jobs"]:
            emit(event_line(EVENT_JOB_FINISHED, job=job))
        emit(event_line(EVENT_DONE, document=document))


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[tuple[FarmHome, RecordedRunService]]:
    home = FarmHome(tmp_path / "farm")
    home.ensure()
    service = RecordedRunService(BlobStore(home.root / "uploads"), ArtifactStore(home.artifacts))
    server: ApiServer = start_api_server(service, TOKEN, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        record = new_record(server.url, home.store_path, "0.0.0", DEFAULT_PROFILES_DIR)
        record_controller(home.root / CONTROLLER_FILE, record)
        yield home, service
    finally:
        server.stop()


def _submit(home: FarmHome, model: Path, tmp_path: Path, name: str) -> set[str]:
    """`farm submit MODEL -d host-cpu` as a user types it; the modules its process loaded."""
    loaded = tmp_path / f"{name}.modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "FARM_"))}
    env.update({"HOME": str(tmp_path), "FARM_HOME": str(home.root), TOKEN_VAR: TOKEN})
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, str(loaded), "submit", str(model), "-d", "host-cpu"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert USED in done.stderr, done.stderr[-3000:]  # the thin client's path, not an embedded run
    assert "host-cpu" in done.stdout  # the terminal report was printed
    return set(json.loads(loaded.read_text(encoding="utf-8")))


def _heavy(modules: set[str]) -> list[str]:
    """The heavy packages among `modules`, by their top-level names."""
    return sorted({m.partition(".")[0] for m in modules} & set(HEAVY))


def test_a_warm_submit_to_a_running_controller_imports_nothing_heavy(
    controller: tuple[FarmHome, RecordedRunService], tmp_path: Path
) -> None:
    home, service = controller
    _submit(home, TINYNET, tmp_path, "first")  # may read the graph for the kernels table
    warm = _submit(home, TINYNET, tmp_path, "warm")
    assert len(service.bodies) == 2 and not service.bodies[0].model.external_data
    assert "ondevice_farm.api.client" in warm  # it went through the thin client
    assert not _heavy(warm), f"the thin client imported {_heavy(warm)}"


def test_a_model_with_external_data_goes_as_one_tar_without_onnx(
    controller: tuple[FarmHome, RecordedRunService], tmp_path: Path
) -> None:
    import onnx

    from tests.core.test_external_data import matmul_model

    home, service = controller
    model = matmul_model(tmp_path / "ext", location="weights/w.data")
    initializers = onnx.load(str(model), load_external_data=False).graph.initializer
    assert [t.data_location for t in initializers] == [onnx.TensorProto.EXTERNAL]
    _submit(home, model, tmp_path, "first")
    warm = _submit(home, model, tmp_path, "warm")
    assert [body.model.external_data and not body.model.tree for body in service.bodies] == [True, True]
    assert not _heavy(warm), f"the thin client imported {_heavy(warm)}"
