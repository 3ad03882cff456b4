"""The thin submitter: `farm submit --address http://HOST:PORT` sends its files and options to a
running `farm serve` and reads the run back, without Ray (server.py says why)."""

from __future__ import annotations

import hashlib
import http.client
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

from ondevice_farm.api.wire import (
    BLOBS_PATH,
    DEFAULT_SILENCE_TIMEOUT_S,
    EVENT_DONE,
    EVENT_ERROR,
    EVENT_JOB_FINISHED,
    EVENT_JOBS_STARTED,
    EVENT_STAGE,
    SUBMISSIONS_PATH,
    FileRef,
    SubmissionBody,
    SubmitOptions,
    error_from_event,
)
from ondevice_farm.artifacts import CHUNK_BYTES, sha256_file, write_model_tar, write_tree_tar
from ondevice_farm.errors import ModelError, SchedulingError, UsageError
from ondevice_farm.onnx_external import external_files
from ondevice_farm.progress import Progress

#: connecting and each upload or answer: generous for a model of gigabytes on a slow link
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: how long a submitter keeps asking a controller that answers 429 (busy) before it gives up
DEFAULT_BUSY_WAIT_S = 600.0
#: when to ask again after the controller reset the connection before answering (a refusal's race)
DEFAULT_RESET_RETRY_S = 1.0
T = TypeVar("T")


class ControllerBusyError(SchedulingError):
    """A 429: the controller takes no more now and says when to ask again (api/admission.py)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def patiently(call: Callable[[], T], target: ApiTarget, progress: Progress) -> T:
    """`call`, asked again after each 429 as the controller says, for up to DEFAULT_BUSY_WAIT_S."""
    waited_s = 0.0
    while True:
        try:
            return call()
        except ControllerBusyError as busy:
            wait_s = max(1.0, busy.retry_after_s)
            if waited_s + wait_s > DEFAULT_BUSY_WAIT_S:
                raise SchedulingError(
                    f"the farm controller at {target.url} stayed busy for {waited_s:.0f}s ({busy.message})",
                    hint="try again later, or ask its operator to raise farm serve's --max-submissions",
                ) from None
            progress.stage(f"{busy.message}; asking again in {wait_s:.0f}s")
            time.sleep(wait_s)
            waited_s += wait_s


@dataclass(frozen=True)
class ApiTarget:
    """Where the controller's submit API is and what to send it."""

    url: str
    #: the cluster's token (None: send none)
    token: str | None
    #: what the operator is told when the token is refused
    refused_hint: str = ""
    silence_timeout_s: float = DEFAULT_SILENCE_TIMEOUT_S

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"not a controller address: {self.url}", hint="e.g. --address http://HOST:9478")
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return cls(parts.hostname, parts.port, timeout=timeout_s)

    def headers(self, **more: str) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**auth, **more}


def _local_file(path: Path, what: str) -> Path:
    if path.is_dir() and what == "model":  # a model folder travels as one tar of its tree
        return path
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; it must be a file")
    if not path.is_file():
        error = ModelError if what == "model" else UsageError
        raise error(f"{what} not found: {path}")
    return path


def target_for(address: str) -> ApiTarget:
    """The controller at `address`, with this host's cluster token (found as Ray would find it)."""
    from ondevice_farm.controller.ray_auth import read_token, refused_hint, use_local_token

    setup = use_local_token()
    return ApiTarget(url=address.rstrip("/"), token=read_token(setup), refused_hint=refused_hint(setup))


@contextmanager
def api_request(
    target: ApiTarget,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> Iterator[http.client.HTTPResponse]:
    connection = target.connection(timeout_s)
    try:
        try:
            connection.request(method, path, body=body, headers=target.headers(**(headers or {})))
            response = connection.getresponse()
        except (ConnectionResetError, BrokenPipeError) as exc:
            # A controller past its connection limit answers 429 and closes; when the close beats
            # the request, the client sees a reset instead (api/admission.py): busy, ask again.
            raise ControllerBusyError(
                f"the farm controller at {target.url} closed the connection ({exc.strerror or exc})",
                DEFAULT_RESET_RETRY_S,
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise SchedulingError(
                f"cannot reach the farm controller at {target.url}: {exc}",
                hint="is `farm serve` running there? it prints its submit API address when it starts",
            ) from None
        if response.status == HTTPStatus.TOO_MANY_REQUESTS:
            answer = json.loads(response.read() or b"{}").get("error") or {}
            raise ControllerBusyError(
                str(answer.get("message") or f"the farm controller at {target.url} is busy"),
                float(response.getheader("Retry-After") or 5),
            )
        if response.status == 401:
            raise SchedulingError(
                f"the farm controller at {target.url} refused this host's authentication token",
                hint=target.refused_hint,
            )
        yield response
    finally:
        connection.close()


def _upload(target: ApiTarget, path: Path, progress: Progress) -> FileRef:
    """The file on the controller under its hash; sent only if the controller lacks it. A directory
    goes as one tar of its tree, and an ONNX model with external data as one tar of the model and
    its data files, written to a temporary file first (never held in memory)."""
    external = not path.is_dir() and bool(external_files(path))
    if not path.is_dir() and not external:
        with path.open("rb") as body:
            return _upload_body(
                target, FileRef(path.name, sha256_file(path)), body, path.stat().st_size, progress
            )
    with tempfile.TemporaryFile() as archive:
        if external:
            write_model_tar(path, archive)
        else:
            write_tree_tar(path, archive)
        size = archive.tell()
        archive.seek(0)
        digest = hashlib.sha256()
        while chunk := archive.read(CHUNK_BYTES):
            digest.update(chunk)
        archive.seek(0)
        ref = FileRef(path.name, digest.hexdigest(), tree=not external, external_data=external)
        return _upload_body(target, ref, archive, size, progress)


def _upload_body(target: ApiTarget, ref: FileRef, body: BinaryIO, size: int, progress: Progress) -> FileRef:
    def attempt() -> FileRef:
        body.seek(0)
        return _upload_once(target, ref, body, size, progress)

    return patiently(attempt, target, progress)


def _upload_once(target: ApiTarget, ref: FileRef, body: BinaryIO, size: int, progress: Progress) -> FileRef:
    with api_request(target, "HEAD", BLOBS_PATH + ref.sha256) as found:
        if found.status == 200:
            return ref
    shown = (
        f"{ref.name}/ (a folder, as one tar)"
        if ref.tree
        else f"{ref.name} and its external data (as one tar)"
        if ref.external_data
        else ref.name
    )
    progress.stage(f"uploading {shown} ({size / 1e6:.1f} MB) to the controller")
    with api_request(target, "PUT", BLOBS_PATH + ref.sha256, body, {"Content-Length": str(size)}) as put:
        answer = put.read()
        if put.status != 201:
            reason = json.loads(answer or b"{}").get("error") or put.reason
            raise UsageError(f"the controller refused {ref.name}: {reason}")
    return ref


def submit_over_api(
    target: ApiTarget,
    model: Path,
    options: SubmitOptions,
    progress: Progress,
    inputs_npz: Path | None = None,
    reference_model: Path | None = None,
) -> dict[str, Any]:
    """The run's document, as `farm submit` embedded would return it; the controller's error,
    as the same FarmError, if it failed the submission. Leaving early (Ctrl-C) closes the
    connection, which cancels the submission on the controller."""

    def upload(path: Path | None, what: str) -> FileRef | None:
        return None if path is None else _upload(target, _local_file(path, what), progress)

    body = SubmissionBody(
        model=_upload(target, _local_file(model, "model"), progress),
        options=options,
        inputs_npz=upload(inputs_npz, "--inputs file"),
        reference_model=upload(reference_model, "--reference model"),
    )
    payload = json.dumps(body.to_json()).encode()
    return patiently(lambda: _submit_once(target, payload, progress), target, progress)


def _submit_once(target: ApiTarget, payload: bytes, progress: Progress) -> dict[str, Any]:
    json_type = {"Content-Type": "application/json"}
    # between events the controller sends a heartbeat: silence this long means it is gone
    with api_request(
        target, "POST", SUBMISSIONS_PATH, payload, json_type, timeout_s=target.silence_timeout_s
    ) as response:
        if response.status != 200:
            raise SchedulingError(
                f"the farm controller at {target.url} answered {response.status} {response.reason}"
            )
        for event in _events(response, target):
            kind = event.get("event")
            if kind == EVENT_STAGE:
                progress.stage(str(event.get("text")))
            elif kind == EVENT_JOBS_STARTED:
                progress.jobs_started(int(event.get("total") or 0))
            elif kind == EVENT_JOB_FINISHED:
                progress.job_finished(event["job"])  # the job's summary: its document is stored
            elif kind == EVENT_ERROR:
                raise error_from_event(event)
            elif kind == EVENT_DONE:
                document: dict[str, Any] = event["document"]  # the run with its jobs, read back
                return document
    raise SchedulingError(
        f"lost the farm controller at {target.url} before the run ended",
        hint="completed jobs are in the controller's store (`farm runs --address`); resubmit the rest",
    )


def _events(response: http.client.HTTPResponse, target: ApiTarget) -> Iterator[dict[str, Any]]:
    while True:
        try:
            line = response.readline()
        except TimeoutError:
            raise SchedulingError(
                f"the farm controller at {target.url} went silent for {target.silence_timeout_s:.0f} s",
                hint="the network or the controller is down; completed jobs are in its store",
            ) from None
        except (OSError, http.client.HTTPException):
            return
        if not line:
            return
        yield json.loads(line)
