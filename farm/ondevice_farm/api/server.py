"""`farm serve`'s submit API: the thin path for `farm submit --address http://HOST:PORT`.

A submitter through Ray pays for importing Ray, connecting a driver and leaving again (about a
second, benchmarks/fleet_overheads.py); over this API it sends its files (once, by hash) and its
options, and reads the run back as it happens. The controller runs the submission on its own,
already connected, fleet. Every request carries the cluster's token (`Authorization: Bearer`),
the same secret as Ray's: who may run code on the nodes may submit. The API listens on loopback
unless told otherwise. A submitter that disconnects (Ctrl-C, SIGTERM, kill -9, a lost network)
cancels its submission: its queued jobs are dropped and its running ones stopped on their units.
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ondevice_farm.api.admission import DEFAULT_API_LIMITS, ApiLimits
from ondevice_farm.api.submissions import SubmissionService
from ondevice_farm.api.wire import (
    API_VERSION,
    BLOBS_PATH,
    CANCEL_PATH,
    DEFAULT_API_HOST,
    DEFAULT_API_PORT,
    EVENT_HEARTBEAT,
    HEARTBEAT_S,
    NDJSON,
    STORE_PATH,
    SUBMISSIONS_PATH,
    SubmissionBody,
    error_event,
    error_json,
    event_line,
    is_final,
)
from ondevice_farm.errors import FarmError, SchedulingError, UsageError
from ondevice_farm.json_values import json_default

log = logging.getLogger(__name__)

#: a submission's JSON (options and file references; the files come separately) is small
MAX_SUBMISSION_BYTES = 1024 * 1024
#: how often the stream checks that its submitter is still connected
DISCONNECT_CHECK_S = 0.25
DEFAULT_STOP_TIMEOUT_S = 5.0


class _Handler(BaseHTTPRequestHandler):
    server: _ApiHttpServer
    # one request a connection: a stream ends when its connection does
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: HTTPStatus, payload: dict[str, Any] | None = None) -> None:
        body = b"" if payload is None else json.dumps(payload, default=json_default).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self) -> bool:
        expected = self.server.token
        if expected is None:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            return True
        self._reply(HTTPStatus.UNAUTHORIZED, {"error": "this controller refused the submitter's token"})
        return False

    def _blob_id(self) -> str | None:
        digest = self.path[len(BLOBS_PATH) :] if self.path.startswith(BLOBS_PATH) else ""
        if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            return digest
        self._reply(HTTPStatus.NOT_FOUND, {"error": f"no such path: {self.path}"})
        return None

    def do_GET(self) -> None:
        if self._authorized():
            self._reply(HTTPStatus.OK, {"farm_api": API_VERSION, "submissions": SUBMISSIONS_PATH})

    def do_HEAD(self) -> None:
        if self._authorized() and (digest := self._blob_id()) is not None:
            found = self.server.service.blobs.has(digest)
            self._reply(HTTPStatus.OK if found else HTTPStatus.NOT_FOUND)

    def do_PUT(self) -> None:
        if not self._authorized() or (digest := self._blob_id()) is None:
            return
        try:
            self.server.service.blobs.put(digest, self.rfile, self._length())
        except FarmError as exc:
            self.close_connection = True
            self._reply(HTTPStatus.BAD_REQUEST, {"error": exc.message})
            return
        self._reply(HTTPStatus.CREATED)

    def _length(self) -> int:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise UsageError("a request body needs a Content-Length") from None
        if length < 0:
            raise UsageError("a negative Content-Length")
        return length

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path == STORE_PATH:
            self._read_store()
            return
        if self.path == CANCEL_PATH:
            self._cancel_run()
            return
        if self.path != SUBMISSIONS_PATH:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no such path: {self.path}"})
            return
        try:
            length = self._length()
            if length > MAX_SUBMISSION_BYTES:
                raise UsageError(f"a submission of {length} bytes: the files go to {BLOBS_PATH} first")
            try:
                body = SubmissionBody.from_json(json.loads(self.rfile.read(length)))
            except json.JSONDecodeError as exc:
                raise UsageError(f"a submission that is not JSON: {exc}") from None
        except FarmError as exc:
            self._start_stream()
            self.wfile.write(error_event(exc))
            return
        if not self.server.submissions.acquire(blocking=False):
            self._busy(f"{self.server.limits.max_submissions} submissions are running")
            return
        try:
            self._start_stream()
            self._stream(body)
        finally:
            self.server.submissions.release()

    def _busy(self, why: str) -> None:
        """429 with Retry-After: the submitter waits and asks again (api/admission.py)."""
        payload = json.dumps(
            {"error": error_json(SchedulingError(f"the controller is busy: {why}"))}
        ).encode()
        self.send_response(HTTPStatus.TOO_MANY_REQUESTS)
        self.send_header("Retry-After", str(self.server.limits.retry_after_s))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _json_call(self, what: str, answer: Callable[[Any], Any]) -> None:
        """A JSON body, `answer`ed as `{"result": ...}`, or `{"error": ...}` with the FarmError it
        raised (no such run, ...); `what`: the call, as a refusal names it."""
        try:
            length = self._length()
            if length > MAX_SUBMISSION_BYTES:
                raise UsageError(f"{what} of {length} bytes")
            try:
                call = json.loads(self.rfile.read(length))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{what} that is not JSON: {exc}") from None
            result = answer(call)
        except FarmError as exc:
            self._reply(HTTPStatus.OK, {"error": error_json(exc)})
            return
        self._reply(HTTPStatus.OK, {"result": result})

    def _read_store(self) -> None:
        def read(call: Any) -> Any:
            try:
                method, args, kwargs = (
                    call["method"],
                    list(call.get("args") or []),
                    dict(call.get("kwargs") or {}),
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                raise UsageError("a store read is {method, args, kwargs}") from None
            try:
                return self.server.service.read_store(str(method), args, kwargs)
            except TypeError as exc:  # arguments the method does not take
                raise UsageError(f"a store read: {exc}") from None

        self._json_call("a store read", read)

    def _cancel_run(self) -> None:
        def cancel(call: Any) -> Any:
            try:
                run = call["run"]
            except (KeyError, TypeError):
                raise UsageError("a cancel is {run}") from None
            return self.server.service.cancel_run(str(run))

        self._json_call("a cancel", cancel)

    def _start_stream(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", NDJSON)
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.flush()

    def _stream(self, body: SubmissionBody) -> None:
        """The submission on a thread of its own; this one writes its events, a heartbeat when
        there are none, and notices the submitter leaving (then the submission is cancelled and
        this waits for it to wind down, so its run is marked before the next request)."""
        events: queue.Queue[bytes] = queue.Queue()
        stop = threading.Event()
        worker = threading.Thread(
            target=self.server.service.run, args=(body, events.put, stop), name="farm-submission", daemon=True
        )
        worker.start()
        last_write = time.monotonic()
        while True:
            try:
                line = events.get(timeout=DISCONNECT_CHECK_S)
            except queue.Empty:
                if not worker.is_alive() and events.empty():
                    return  # ended without its last event: a bug, already logged
                if _peer_gone(self.connection):
                    break
                if time.monotonic() - last_write < HEARTBEAT_S:
                    continue
                line = event_line(EVENT_HEARTBEAT)
            try:
                self.wfile.write(line)
                self.wfile.flush()
            except OSError:
                break
            last_write = time.monotonic()
            if is_final(line):
                return
        log.info("the submitter of %s went away: cancelling its submission", body.model.name)
        stop.set()
        worker.join()


def _peer_gone(connection: socket.socket) -> bool:
    """True once the submitter closed its end: it sends nothing after its request, so a readable
    socket here means end of file (or a reset)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _ApiHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], service: SubmissionService, token: str | None, limits: ApiLimits
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self.service = service
        self.token = token
        self.limits = limits
        self.submissions = threading.BoundedSemaphore(limits.max_submissions)
        self._connections = 0
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection up to `max_connections`; past it, a 429 from this (the
        listening) thread, and no thread."""
        with self._connections_lock:
            full = self._connections >= self.limits.max_connections
            if not full:
                self._connections += 1
        if full:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._leave()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._leave()

    def _leave(self) -> None:
        with self._connections_lock:
            self._connections -= 1

    def _refuse(self, request: socket.socket) -> None:
        error = SchedulingError(f"the controller is busy: {self.limits.max_connections} connections are open")
        payload = json.dumps({"error": error_json(error)}).encode()
        head = (
            f"HTTP/1.0 429 Too Many Requests\r\nRetry-After: {self.limits.retry_after_s}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        try:
            request.settimeout(1.0)
            request.sendall(head.encode() + payload)
            # Closing a socket with unread bytes sends RST, and a client that gets RST before it
            # reads the 429 sees "connection reset" instead: so half-close, then read what the
            # client already sent, without waiting (this is the listening thread).
            request.shutdown(socket.SHUT_WR)
            _drain_without_waiting(request)
        except OSError:
            pass
        self.shutdown_request(request)


def _drain_without_waiting(connection: socket.socket, most_bytes: int = 1 << 20) -> None:
    read = 0
    while read < most_bytes:
        try:
            chunk = connection.recv(65536, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            return
        read += len(chunk)


@dataclass
class ApiServer:
    """A running submit API; `stop()` once."""

    host: str
    port: int
    _server: _ApiHttpServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout_s)


def start_api_server(
    service: SubmissionService,
    token: str | None,
    host: str = DEFAULT_API_HOST,
    port: int = DEFAULT_API_PORT,
    limits: ApiLimits = DEFAULT_API_LIMITS,
) -> ApiServer:
    """Serve submissions on host:port (0: any free port; `.port` says which). `token` None: no
    authentication, for a cluster whose Ray runs without it."""
    try:
        server = _ApiHttpServer((host, port), service, token, limits)
    except OSError as exc:
        raise UsageError(
            f"cannot serve the submit API on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --api-port (0 picks a free one) or --api-host",
        ) from None
    thread = threading.Thread(target=server.serve_forever, name="farm-api", daemon=True)
    thread.start()
    return ApiServer(host=host, port=int(server.server_address[1]), _server=server, _thread=thread)
