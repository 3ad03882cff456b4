"""This host's `farm serve`, found by a plain `farm submit`.

An embedded submit pays for starting Ray (7-8 s of wall time for a model of a millisecond); a
submit to a running `farm serve` over its submit API costs a quarter of a second (server.py). So
`farm serve` records where its API listens in the farm directory (`controller.json`: URL, pid,
versions, which store it writes; nothing secret, the token stays in its own file), and a plain
`farm submit` with the same farm directory uses it when it is up: its pid alive, its API
answering with this host's token. Otherwise the submit runs embedded and says why in one line.

This module is imported by the thin client: it stays free of numpy, onnx and Ray.
"""

from __future__ import annotations

import http.client
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ondevice_farm.api.wire import API_VERSION
from ondevice_farm.store_sql import StoreLocation, is_postgres_url

#: in the farm directory, beside the results store
CONTROLLER_FILE = "controller.json"
#: a controller on this host answers its API's index in milliseconds (its own thread, whatever it
#: runs); one that does not in this long, on a loaded host too, is not worth waiting for
DEFAULT_PROBE_TIMEOUT_S = 2.0
#: where a controller listening on every interface is reached from this host
WILDCARD_TO_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True)
class LocalController:
    """What `farm serve` records about itself."""

    #: its submit API, http://HOST:PORT, as a submitter on this host reaches it
    url: str
    pid: int
    farm_version: str
    api_version: int
    #: where its runs go (`store_identity`): a submit that would store elsewhere runs embedded
    store: str
    started_at: float
    #: the device profiles directory it serves (absolute): a submit asking for others runs embedded
    profiles: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> LocalController:
        """ValueError where `value` is not a record this farm wrote."""
        if not isinstance(value, dict):
            raise ValueError("not an object")
        try:
            return cls(
                url=str(value["url"]),
                pid=int(value["pid"]),
                farm_version=str(value["farm_version"]),
                api_version=int(value["api_version"]),
                store=str(value["store"]),
                started_at=float(value["started_at"]),
                profiles=str(value.get("profiles") or ""),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"missing or wrong field: {exc}") from None


@dataclass(frozen=True)
class Found:
    """A plain submit's view of the local controller: the one to use, or why there is none."""

    controller: LocalController | None = None
    #: the one stderr line that says why a recorded controller is not used (None: nothing recorded)
    why_not: str | None = None


def store_identity(location: StoreLocation) -> str:
    """Which store a location names, comparable between two processes and free of secrets: a
    SQLite file's absolute path, a PostgreSQL URL without its password and parameters."""
    if isinstance(location, str) and is_postgres_url(location):
        parts = urlsplit(location)
        netloc = parts.hostname or ""
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
        if parts.username:
            netloc = f"{parts.username}@{netloc}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return str(Path(location).expanduser().resolve())


def reachable_url(host: str, port: int) -> str:
    """The URL a submitter on this host uses for an API bound to `host` (a wildcard: loopback)."""
    host = WILDCARD_TO_LOOPBACK.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def record_controller(path: Path, controller: LocalController) -> None:
    """Write the record whole or not at all (a submitter may read it at any moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".controller-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(controller.to_json(), out)
        os.chmod(staging, 0o644)  # nothing secret: any user who may submit may read it
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def forget_controller(path: Path, pid: int) -> None:
    """Remove the record if it is still `pid`'s (a newer `farm serve` may have replaced it)."""
    try:
        recorded = LocalController.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return
    if recorded.pid == pid:
        path.unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return pid > 0


def _answers(url: str, token: str | None, timeout_s: float) -> int | None:
    """The HTTP status of the API's index with `token`, or None if nothing answered in time."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", "/", headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status == 200 and json.loads(body or b"{}").get("farm_api") != API_VERSION:
            return None
        return response.status
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


def local_token() -> str | None:
    """The token a submitter on this host sends (as `ray_auth.use_local_token` finds it), read
    without setting anything in this process's environment: a plain submit that runs embedded
    after all starts its Ray as it always did. OSError where the token file cannot be read."""
    from ondevice_farm.controller.ray_auth import AUTH_MODE_VAR, TOKEN_VAR, token_path

    mode = os.environ.get(AUTH_MODE_VAR)
    if mode is not None and mode.lower() != "token":
        return None
    if os.environ.get(TOKEN_VAR):
        return os.environ[TOKEN_VAR].strip()
    path = token_path()
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def find_local_controller(
    path: Path,
    store: StoreLocation,
    token: str | None,
    timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    profiles_dir: Path | None = None,
) -> Found:
    """The controller recorded at `path` if a submit storing in `store`, with the device profiles
    in `profiles_dir` (None: any), and sending `token` can use it now; else why not, in one line
    (nothing recorded: nothing to say)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Found()
    except OSError as exc:
        return Found(why_not=f"cannot read {path} ({exc.strerror}): running here, with an embedded Ray")
    try:
        controller = LocalController.from_json(json.loads(text))
    except ValueError:
        return Found(why_not=f"ignoring {path}: not a controller record; running here, with an embedded Ray")
    stale = f"ignoring the stale {path} (`farm serve` pid {controller.pid}, {controller.url})"
    if not pid_alive(controller.pid):
        return Found(why_not=f"{stale}: that process is gone; running here, with an embedded Ray")
    if controller.api_version != API_VERSION:
        return Found(
            why_not=f"the farm controller at {controller.url} speaks submit API {controller.api_version}, "
            f"this farm {API_VERSION}: running here, with an embedded Ray"
        )
    if controller.store != store_identity(store):
        return Found(
            why_not=f"the farm controller at {controller.url} stores its runs in {controller.store}, this "
            f"submit in {store_identity(store)}: running here, with an embedded Ray"
        )
    if profiles_dir is not None and controller.profiles != str(profiles_dir.expanduser().resolve()):
        return Found(
            why_not=f"the farm controller at {controller.url} serves the device profiles in "
            f"{controller.profiles or 'an unrecorded directory'}, this submit asks for those in "
            f"{profiles_dir}: running here, with an embedded Ray"
        )
    status = _answers(controller.url, token, timeout_s)
    if status is None:  # a reused pid, or a controller that stopped serving its API
        return Found(
            why_not=f"the farm controller in {path} (pid {controller.pid}) did not answer at "
            f"{controller.url} in {timeout_s:g} s: running here, with an embedded Ray"
        )
    if status == 401:
        return Found(
            why_not=f"the farm controller at {controller.url} refused this host's token: running here, "
            "with an embedded Ray"
        )
    if status != 200:
        return Found(
            why_not=f"the farm controller at {controller.url} answered {status}: running here, with an "
            "embedded Ray"
        )
    return Found(controller=controller)


def new_record(
    url: str, store: StoreLocation, farm_version: str, profiles_dir: Path | None = None
) -> LocalController:
    """This process's record, as `farm serve` writes it once its API listens."""
    return LocalController(
        url=url,
        pid=os.getpid(),
        farm_version=farm_version,
        api_version=API_VERSION,
        store=store_identity(store),
        started_at=time.time(),
        profiles="" if profiles_dir is None else str(profiles_dir.expanduser().resolve()),
    )
