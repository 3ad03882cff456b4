"""Twenty submitters at once: the submit API admits a bounded number of submissions and
connections (a 429 with Retry-After past them, and no thread for a refused connection), its
submitters wait and ask again, and compiles take turns in a few slots."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.api.admission import ApiLimits, CompileSlots
from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.api.client import ApiTarget, api_request, patiently, submit_over_api
from ondevice_farm.api.server import ApiServer, start_api_server
from ondevice_farm.api.wire import (
    EVENT_DONE,
    SUBMISSIONS_PATH,
    FileRef,
    SubmissionBody,
    SubmitOptions,
    event_line,
)
from ondevice_farm.errors import JobCancelledError
from ondevice_farm.progress import SilentProgress

LIMITS = ApiLimits(max_submissions=4, max_connections=8, retry_after_s=1)
#: threads of the API server: one per connection, one per submission
SERVER_THREADS = ("process_request_thread", "farm-submission")


def server_threads() -> int:
    return sum(1 for t in threading.enumerate() if any(name in t.name for name in SERVER_THREADS))


class BriefService:
    """Each submission holds its slot for `hold_s`, then is done; counts the server's threads."""

    def __init__(self, blobs: BlobStore, hold_s: float) -> None:
        self.blobs = blobs
        self.hold_s = hold_s
        self.running = 0
        self.peak_running = 0
        self.peak_threads = 0
        self._lock = threading.Lock()

    def run(self, body: SubmissionBody, emit: Any, stop: threading.Event) -> None:
        with self._lock:
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
            self.peak_threads = max(self.peak_threads, server_threads())
        stop.wait(self.hold_s)
        with self._lock:
            self.running -= 1
        emit(event_line(EVENT_DONE, document={"run_id": body.model.name, "jobs": []}))


@pytest.fixture
def brief(tmp_path: Path) -> Iterator[tuple[ApiServer, BriefService]]:
    service = BriefService(BlobStore(tmp_path / "uploads"), hold_s=0.5)
    server = start_api_server(service, None, "127.0.0.1", 0, LIMITS)  # type: ignore[arg-type]
    try:
        yield server, service
    finally:
        server.stop()


def post(server: ApiServer) -> http.client.HTTPResponse:
    body = json.dumps(SubmissionBody(FileRef("m.onnx", "0" * 64)).to_json())
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", SUBMISSIONS_PATH, body)
    return connection.getresponse()


def test_a_submission_past_the_limit_gets_429_with_retry_after(brief: tuple[ApiServer, BriefService]) -> None:
    server, service = brief
    service.hold_s = 30.0
    admitted = [post(server) for _ in range(LIMITS.max_submissions)]
    assert all(r.status == 200 for r in admitted)
    refused = post(server)
    assert refused.status == 429 and refused.getheader("Retry-After") == "1"
    assert "4 submissions are running" in json.loads(refused.read())["error"]["message"]
    admitted[0].close()  # its submitter leaves: its slot frees
    deadline = time.monotonic() + 10
    while (answer := post(server)).status == 429 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answer.status == 200
    for response in [*admitted, answer]:
        response.close()


def test_connections_past_the_limit_are_refused_without_a_thread(
    brief: tuple[ApiServer, BriefService],
) -> None:
    server, _ = brief
    before = server_threads()
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(30)]
    try:
        time.sleep(0.5)
        assert server_threads() - before <= LIMITS.max_connections
        refused = idle[-1].recv(200)
        assert refused.startswith(b"HTTP/1.0 429 Too Many Requests") and b"Retry-After: 1" in refused
    finally:
        for sock in idle:
            sock.close()


def test_twenty_submitters_at_once_all_get_their_runs_with_the_threads_bounded(
    brief: tuple[ApiServer, BriefService], tmp_path: Path
) -> None:
    server, service = brief
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not looked at")
    target = ApiTarget(url=server.url, token=None)
    results: list[Any] = []

    def submitter() -> None:
        try:
            results.append(submit_over_api(target, model, SubmitOptions(), SilentProgress()))
        except BaseException as exc:  # said below
            results.append(exc)

    threads = [threading.Thread(target=submitter) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 20 and all(isinstance(r, dict) and r["run_id"] == "m.onnx" for r in results), [
        r for r in results if not isinstance(r, dict)
    ][:3]
    assert service.peak_running == LIMITS.max_submissions
    assert service.peak_threads <= LIMITS.max_connections + LIMITS.max_submissions


class Stages(SilentProgress):
    def __init__(self) -> None:
        self.said: list[str] = []

    def stage(self, text: str) -> None:
        self.said.append(text)


def test_compiles_take_turns_in_their_slots_and_a_waiting_one_can_be_cancelled() -> None:
    slots = CompileSlots(1)
    stop = threading.Event()
    first = Stages()
    with slots.held(first, stop):
        waiting = Stages()
        entered = threading.Event()
        errors: list[BaseException] = []

        def second() -> None:
            try:
                with slots.held(waiting, stop):
                    entered.set()
            except JobCancelledError as exc:
                errors.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.5)
        assert not entered.is_set() and waiting.said == ["waiting for a compile slot (1 busy, 1 waiting)"]
        stop.set()
        thread.join(timeout=5)
        assert errors and not entered.is_set()
    assert first.said == []
    stop.clear()
    with slots.held(Stages(), stop):  # the slot came back
        pass


def test_a_connection_reset_before_the_answer_is_asked_again_as_a_busy_controller() -> None:
    """A refusal's close can beat the request: the submitter sees a reset, not the 429, and must
    ask again (one CI run lost a submitter to exactly that)."""
    listener = socket.create_server(("127.0.0.1", 0))
    answered: list[int] = []

    def serve() -> None:
        for attempt in range(2):
            connection, _ = listener.accept()
            if attempt == 0:  # reset: close at once with linger 0
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()
                continue
            connection.recv(65536)
            connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            connection.close()
            answered.append(attempt)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    target = ApiTarget(url=f"http://127.0.0.1:{listener.getsockname()[1]}", token=None)

    def ask() -> bytes:
        with api_request(target, "GET", "/v1/anything") as response:
            return response.read()

    stages = Stages()
    try:
        assert patiently(ask, target, stages) == b"ok"
    finally:
        thread.join(timeout=10)
        listener.close()
    assert answered == [1]
    assert len(stages.said) == 1 and "closed the connection" in stages.said[0], stages.said
