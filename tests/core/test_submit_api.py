"""The submit API's pieces without a fleet: the wire format, the blob store, and the HTTP layer's
authentication and its cancel on disconnect (with a service that only waits, and measures nothing;
the fleet tests in tests/fleet/test_auth.py and test_cancel_submissions.py run real jobs)."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.api.server import ApiServer, start_api_server
from ondevice_farm.api.wire import (
    CANCEL_PATH,
    EVENT_DONE,
    STORE_PATH,
    SUBMISSIONS_PATH,
    FileRef,
    SubmissionBody,
    SubmitOptions,
    error_event,
    error_from_event,
    event_line,
    is_final,
)
from ondevice_farm.errors import FarmError, ReferenceCheckError, UsageError

TOKEN = "s3cret"


def test_options_cross_the_wire_unchanged_and_parse_like_the_command_line() -> None:
    options = SubmitOptions(
        devices="host-cpu,pixel8", targets="ort/cpu", runs=7, shapes=("x=1x3",), tolerances=("atol=0.1",),
        sustained="90s", threads=2, profile_ops=False,
    )  # fmt: skip
    again = SubmitOptions.from_json(json.loads(json.dumps(options.to_json())))
    assert again == options
    request = again.request(Path("m.onnx"))
    assert request.runs == 7 and request.sustained_s == 90.0 and request.shapes == {"x": (1, 3)}
    assert request.intra_op_threads == 2 and not request.profile_ops


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"runs": "7"}, "runs"),
        ({"profile_ops": 1}, "profile_ops"),
        ({"shapes": "x=1"}, "shapes"),
        ({"launch_missiles": True}, "unknown submission option(s): launch_missiles"),
    ],
)
def test_options_of_the_wrong_type_or_unknown_are_refused(options: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        SubmitOptions.from_json(options)


@pytest.mark.parametrize("name", ["../../etc/passwd", "a/b.onnx", "", ".."])
def test_a_file_reference_names_a_plain_file(name: str) -> None:
    with pytest.raises(UsageError):
        FileRef.from_json({"name": name, "sha256": "0" * 64})


def test_a_submission_of_another_api_version_is_refused() -> None:
    body = SubmissionBody(FileRef("m.onnx", "0" * 64)).to_json()
    assert SubmissionBody.from_json(body).model.name == "m.onnx"
    with pytest.raises(UsageError, match="submit API"):
        SubmissionBody.from_json({**body, "api_version": 99})


def test_the_controllers_error_comes_back_as_the_same_error() -> None:
    event = json.loads(error_event(ReferenceCheckError("outputs differ", hint="look")))
    error = error_from_event(event)
    assert type(error) is ReferenceCheckError and error.exit_code == 9 and error.hint == "look"
    assert type(error_from_event({"type": "NotAnError", "message": "x"})) is FarmError


def test_a_blob_is_kept_only_if_its_bytes_match_its_hash(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "uploads")
    data = b"model bytes"
    digest = hashlib.sha256(data).hexdigest()
    with pytest.raises(UsageError, match="hash to"):
        store.put(digest, io.BytesIO(b"other bytes"), len(data))
    with pytest.raises(UsageError, match="ended after"):
        store.put(digest, io.BytesIO(data[:4]), len(data))
    assert not store.has(digest)
    assert not list((tmp_path / "uploads").glob(".upload-*"))  # nothing half-written
    store.put(digest, io.BytesIO(data), len(data))
    named = store.path(digest, "tiny.onnx")
    assert named.name == "tiny.onnx" and named.read_bytes() == data
    with pytest.raises(UsageError, match="not uploaded"):
        store.path("f" * 64, "other.onnx")


class WaitingService:
    """Runs nothing: holds a submission open until told to stop, and says whether it was."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        self.started = threading.Event()
        self.stopped = threading.Event()

    def run(self, body: SubmissionBody, emit: Any, stop: threading.Event) -> None:
        self.started.set()
        if stop.wait(30):
            self.stopped.set()
            return
        emit(event_line(EVENT_DONE, document={}))


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[ApiServer, WaitingService]]:
    service = WaitingService(BlobStore(tmp_path / "uploads"))
    server = start_api_server(service, TOKEN, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        yield server, service
    finally:
        server.stop()


def _post(server: ApiServer, token: str) -> http.client.HTTPResponse:
    body = json.dumps(SubmissionBody(FileRef("m.onnx", "0" * 64)).to_json())
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", SUBMISSIONS_PATH, body, {"Authorization": f"Bearer {token}"})
    return connection.getresponse()


class ControlService(WaitingService):
    """Answers `farm cancel` and store reads: a known run cancels, any other is no such run."""

    def cancel_run(self, run: str) -> dict[str, Any]:
        if run != "r1":
            raise UsageError(f"no run {run!r}")
        return {"run_id": "r1", "left": 3}

    def read_store(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return {"method": method, "args": args}


def _call(server: ApiServer, path: str, body: bytes) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", path, body, {"Authorization": f"Bearer {TOKEN}"})
    answer = connection.getresponse()
    assert answer.status == 200
    decoded: dict[str, Any] = json.loads(answer.read())
    return decoded


def test_cancel_and_store_reads_answer_a_result_or_one_readable_error(tmp_path: Path) -> None:
    server = start_api_server(ControlService(BlobStore(tmp_path / "uploads")), TOKEN, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        assert _call(server, CANCEL_PATH, b'{"run": "r1"}') == {"result": {"run_id": "r1", "left": 3}}
        for body, says in (
            (b'{"run": "r9"}', "no run 'r9'"),
            (b'{"runs": "r1"}', "a cancel is {run}"),
            (b"not json", "a cancel that is not JSON"),
        ):
            error = error_from_event(_call(server, CANCEL_PATH, body)["error"])
            assert isinstance(error, UsageError) and says in error.message, error.message
        read = _call(server, STORE_PATH, b'{"method": "runs", "args": [5]}')
        assert read == {"result": {"method": "runs", "args": [5]}}
        error = error_from_event(_call(server, STORE_PATH, b"[1]")["error"])
        assert "a store read is {method, args, kwargs}" in error.message
    finally:
        server.stop()


def test_a_request_without_the_token_is_refused(api: tuple[ApiServer, WaitingService]) -> None:
    server, service = api
    assert _post(server, "wrong").status == 401
    assert not service.started.is_set()


def test_a_submitter_that_disconnects_cancels_its_submission(api: tuple[ApiServer, WaitingService]) -> None:
    server, service = api
    response = _post(server, TOKEN)
    assert response.status == 200
    assert service.started.wait(10)
    began = time.monotonic()
    response.close()  # what a Ctrl-C'd or killed submitter's socket does
    assert service.stopped.wait(10), "the submission was not cancelled when its submitter left"
    assert time.monotonic() - began < 2


def test_a_submitter_that_stays_is_not_cancelled(api: tuple[ApiServer, WaitingService]) -> None:
    server, service = api
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        body = json.dumps(SubmissionBody(FileRef("m.onnx", "0" * 64)).to_json()).encode()
        raw.sendall(
            f"POST {SUBMISSIONS_PATH} HTTP/1.0\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert service.started.wait(10)
        assert not service.stopped.wait(1.0)


def test_the_thin_submitter_imports_neither_ray_nor_numpy_nor_onnx() -> None:
    """What keeps a warm submit fast (benchmarks/fleet_overheads.py): the CLI, the API client and
    the terminal report load without the heavy modules, which only the controller needs."""
    import subprocess
    import sys

    probe = (
        "import sys; import ondevice_farm.cli.main, ondevice_farm.cli.submit, ondevice_farm.api.client, "
        "ondevice_farm.reports.terminal, ondevice_farm.controller.ray_auth, "
        "ondevice_farm.controller.cluster; "
        "print(sorted(m for m in ('ray', 'numpy', 'onnx', 'onnxruntime') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_quiet_submission_sends_heartbeats(
    api: tuple[ApiServer, WaitingService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a submission has nothing to say (a long job, a compile) the stream stays alive."""
    import ondevice_farm.api.server as server_module

    monkeypatch.setattr(server_module, "HEARTBEAT_S", 0.3)
    server, service = api
    response = _post(server, TOKEN)
    assert service.started.wait(10)
    beats = [json.loads(response.readline())["event"] for _ in range(3)]
    assert beats == ["heartbeat"] * 3
    response.close()


def test_a_submitter_gives_up_on_a_silent_controller(tmp_path: Path) -> None:
    """A controller that accepted and then says nothing (a network gone dark) is an error, in time."""
    from ondevice_farm.api.client import ApiTarget, submit_over_api
    from ondevice_farm.errors import SchedulingError
    from ondevice_farm.progress import SilentProgress

    model = tmp_path / "m.onnx"
    model.write_bytes(b"not looked at")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def mute_controller() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            request = connection.recv(65536)
            if request.startswith(b"HEAD"):  # "I have the file": no upload
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
                connection.close()
            else:
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n")
                # ... and nothing more; kept open

    threading.Thread(target=mute_controller, daemon=True).start()
    target = ApiTarget(url=f"http://127.0.0.1:{port}", token=None, silence_timeout_s=0.5)
    began = time.monotonic()
    try:
        with pytest.raises(SchedulingError, match="went silent"):
            submit_over_api(target, model, SubmitOptions(), SilentProgress())
    finally:
        listener.close()
    assert time.monotonic() - began < 5


def test_the_stream_ends_at_done_or_error_and_nothing_else() -> None:
    assert is_final(event_line(EVENT_DONE, document={"jobs": []}))
    assert is_final(error_event(UsageError("bad")))
    assert not is_final(event_line("job_finished", job={"event": "done"}))
    assert not is_final(event_line("heartbeat"))
