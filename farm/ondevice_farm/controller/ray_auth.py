"""Ray's token authentication, made to work without exported variables.

Ray 2.60 enables token auth on a new local cluster and keeps the token in `~/.ray/auth_token`
(created world-readable), but a driver that connects to an existing cluster sends the token only
when `RAY_AUTH_MODE=token` is set, and a refused driver retries for 20 s before it says
"Failed to connect". Here: the token file is made owner-only, a driver on the head's host finds
the token where `ray start` left it, and a refusal is found with one RPC and said in one line.
"""

from __future__ import annotations

import importlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.errors import SchedulingError

AUTH_MODE_VAR = "RAY_AUTH_MODE"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
TOKEN_VAR = "RAY_AUTH_TOKEN"
#: how long the one authentication probe of a head waits for its answer
DEFAULT_PROBE_TIMEOUT_S = 5.0
TOKEN_BYTES = 32


@dataclass(frozen=True)
class AuthSetup:
    """What this process sends: whether token auth is on, and from which file (None: none found)."""

    token_mode: bool
    token_path: Path | None


def default_token_path() -> Path:
    """Where `ray start`, `ray get-auth-token --generate` and a local `ray.init()` keep the token."""
    return Path.home() / ".ray" / "auth_token"


def token_path() -> Path:
    configured = os.environ.get(TOKEN_PATH_VAR)
    return Path(configured) if configured else default_token_path()


def secure_token_file(path: Path) -> None:
    """Owner-only: the token lets anyone who reads it run code on every node."""
    try:
        if path.is_file() and path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass  # not ours to change; Ray reads it as it is


def ensure_local_token() -> Path:
    """The token a new embedded cluster uses, created owner-only if none exists yet (Ray would
    create it world-readable)."""
    path = token_path()
    if not path.exists() and os.environ.get(AUTH_MODE_VAR, "token").lower() == "token":
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            pass
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(TOKEN_BYTES))
    secure_token_file(path)
    return path


def use_local_token() -> AuthSetup:
    """Before connecting to a cluster: with no `RAY_AUTH_MODE` set and a token on this host
    (`RAY_AUTH_TOKEN_PATH` or `~/.ray/auth_token`), send it; Ray itself would not."""
    mode = os.environ.get(AUTH_MODE_VAR)
    path = token_path()
    if mode is None and (path.is_file() or os.environ.get(TOKEN_VAR)):
        os.environ[AUTH_MODE_VAR] = "token"
        if path.is_file():
            os.environ[TOKEN_PATH_VAR] = str(path)
        mode = "token"
        _reload_ray_auth()
    if path.is_file():
        secure_token_file(path)
    token_mode = (mode or "").lower() == "token"
    return AuthSetup(token_mode, path if token_mode and path.is_file() else None)


def _reload_ray_auth() -> None:
    """Ray's C++ core read RAY_AUTH_MODE and the token when `ray` was imported: have it read them
    again (as Ray's own `_enable_token_auth` does), or `ray.init` connects without the token."""
    import sys

    if "ray" not in sys.modules:
        return
    raylet: Any = importlib.import_module("ray._raylet")
    raylet.Config.initialize("")
    raylet.AuthenticationTokenLoader.instance().reset_cache()


def read_token(setup: AuthSetup) -> str | None:
    """The token this process sends (the same to Ray and to `farm serve`'s submit API)."""
    if not setup.token_mode:
        return None
    if os.environ.get(TOKEN_VAR):
        return os.environ[TOKEN_VAR].strip()
    if setup.token_path is not None:
        return setup.token_path.read_text().strip()
    return None


def refused_hint(setup: AuthSetup) -> str:
    where = f"the token in {setup.token_path}" if setup.token_path else "no token"
    return (
        f"this host sent {where}; copy the head's token file (`ray get-auth-token` on the head prints it) "
        f"here and set {AUTH_MODE_VAR}=token {TOKEN_PATH_VAR}=/path/to/that/file"
    )


def check_head_accepts(address: str, setup: AuthSetup, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> None:
    """One RPC to the head's GCS with what `ray.init` would send: a refusal is an error now, in one
    line, instead of Ray's 20 s of retries ending in "Failed to connect". Anything else (nothing
    listening, a `ray://` address) is left to `ray.init` to report."""
    if address.startswith("ray://") or ":" not in address:
        return
    # untyped: grpc ships no stubs, Ray's generated modules none either
    grpc: Any = importlib.import_module("grpc")
    gcs_service_pb2: Any = importlib.import_module("ray.core.generated.gcs_service_pb2")
    gcs_service_pb2_grpc: Any = importlib.import_module("ray.core.generated.gcs_service_pb2_grpc")

    token = read_token(setup)
    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise SchedulingError(
                    f"the Ray head at {address} refused this host's authentication token",
                    hint=refused_hint(setup),
                ) from None


def submitter_instructions(address: str, loopback_only: bool = False) -> str:
    """What `farm serve` tells the operator: how a submitter here, and one elsewhere, connects
    (`loopback_only`: every port of its embedded Ray was found bound to loopback)."""
    path = token_path()
    if loopback_only:
        return (
            f"Ray clients (`farm nightly/runs/show/report --address {address}`, or `farm submit` as a Ray "
            f"driver) from this host find the token in {path}; no other host reaches this Ray: "
            "`farm serve --bind ADDRESS` to take other hosts"
        )
    if os.environ.get(AUTH_MODE_VAR, "token").lower() != "token":
        return (
            f"Ray clients: `farm nightly/runs/show/report/agent --address {address}` "
            f"(Ray token auth is off: {AUTH_MODE_VAR})"
        )
    return (
        f"Ray clients: `farm nightly/runs/show/report/agent --address {address}`; on this host the token "
        f"in {path} is found; "
        f"on another host copy that file (mode 0600) and set {AUTH_MODE_VAR}=token "
        f"{TOKEN_PATH_VAR}=/path/to/the/copy"
    )
