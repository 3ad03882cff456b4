"""Reach Ray: the cluster at `address`, or an embedded local one that lives as long as the job.

Ray is imported here and in the actor module only, and only when a command needs it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.controller.watchdog import Watchdog
from ondevice_farm.errors import SchedulingError, UsageError

#: the embedded Ray's object store: small, results are small and the host has other work to do
DEFAULT_OBJECT_STORE_BYTES = 256 * 1024 * 1024
RAY_NAMESPACE = "farm"
#: where an embedded Ray (and `farm serve`'s embedded head) listens unless told otherwise: a
#: Ray node runs code for whoever reaches it, so it is not offered to the network by default.
#: Ray's servers bind loopback only for exactly this node address ("127.0.0.1"; for any other,
#: 127.0.0.2 included, they bind every interface: farm/ondevice_farm/controller/listening.py says which)
DEFAULT_BIND_ADDRESS = "127.0.0.1"
#: an embedded Ray's settings: Ray starts one idle worker process per CPU in advance, for tasks,
#: but the farm runs only actors (num_cpus=0), each in a process of its own; the idle ones would
#: only wake up beside the measurement (each a Python process checking signals every 10 ms)
EMBEDDED_SYSTEM_CONFIG: dict[str, Any] = {
    "enable_worker_prestart": False,
    "prestart_worker_first_driver": False,
}
#: the watchdog's priority: a /proc walk every half second, never to preempt a job's timed runs
WATCHDOG_NICE = 19


@dataclass(frozen=True)
class ClusterConfig:
    #: None: start an embedded local Ray; otherwise `ray://...` or `host:port` of a head
    address: str | None = None
    object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES
    #: this process's node address, where one machine runs several Ray nodes (tests) or has several;
    #: an embedded Ray binds it (None: DEFAULT_BIND_ADDRESS)
    node_ip_address: str | None = None


@contextmanager
def ray_cluster(config: ClusterConfig) -> Iterator[None]:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():  # the caller (a test, `farm serve`) already holds a connection
        yield
        return
    # Ray's driver prints cluster events ("(raylet) The node ... died") on stdout, which is the
    # report's (or the one JSON document's) alone: while Ray runs, they go to stderr
    watchdog = Watchdog() if config.address is None else None
    if watchdog is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, watchdog.process.pid, WATCHDOG_NICE)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            _init(config)
            # an embedded Ray is this command's own: its session directory (logs, sockets, spilled
            # objects) goes with it rather than piling up in Ray's temp folder, one per command
            session_dir = embedded_session_dir() if config.address is None else None
            if config.address is None:
                stop_unused_head_processes()
            try:
                with sigterm_as_interrupt():
                    yield
            finally:
                ray.shutdown()
                if session_dir is not None:
                    remove_session_dir(session_dir)
    finally:
        if watchdog is not None:
            watchdog.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI runner's timeout, `systemctl stop`, `kill`) ends a submission as Ctrl-C does:
    its run marked interrupted, its jobs cancelled, Ray stopped. `ray.init` installs a SIGTERM
    handler of its own that exits without any of that: this one replaces it while Ray runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def node_address_kept(node_ip_address: str) -> Iterator[None]:
    """While `ray.init` starts an embedded node at `node_ip_address`, keep that address.

    `ray.init(_node_ip_address="127.0.0.1")` replaces a loopback address with the host's
    external one (`services.resolve_ip_for_localhost`, on Linux, where Ray's
    `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` is on by default); the GCS, raylet, object manager,
    agents and workers then bind every interface (their servers bind loopback only where the
    node's address is 127.0.0.1). With that setting off, as on macOS and Windows, Ray keeps the
    loopback address: Ray read it into `ray_constants` at import, so it is set there, for this
    start only. A Ray without the attribute is left as it is; `listening.py` reports the truth."""
    from ray._private import ray_constants

    if node_ip_address != DEFAULT_BIND_ADDRESS or not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    previous = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = previous


def _init(config: ClusterConfig) -> None:
    from ondevice_farm.api.wire import is_api_address

    if is_api_address(config.address):
        raise UsageError(
            f"{config.address} is a controller's submit API, for `farm submit`, `runs`, `show` and "
            "`report`; this command needs Ray",
            hint="give it the Ray address `farm serve` printed (HOST:PORT)",
        )
    import ray

    from ondevice_farm.controller.ray_auth import check_head_accepts, ensure_local_token, use_local_token

    kwargs: dict[str, Any] = {
        "namespace": RAY_NAMESPACE,
        "log_to_driver": False,
        "logging_level": logging.ERROR,  # Ray warns of token auth on every start
        "configure_logging": True,
    }
    try:
        if config.address is None:
            ensure_local_token()
            node_ip_address = config.node_ip_address or DEFAULT_BIND_ADDRESS
            with node_address_kept(node_ip_address):
                ray.init(
                    address="local",
                    _node_ip_address=node_ip_address,
                    include_dashboard=False,
                    num_cpus=os.cpu_count() or 1,
                    object_store_memory=config.object_store_bytes,
                    _system_config=EMBEDDED_SYSTEM_CONFIG,
                    **kwargs,
                )
        else:
            check_head_accepts(config.address, use_local_token())
            if config.node_ip_address:
                kwargs["_node_ip_address"] = config.node_ip_address
            ray.init(address=config.address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = config.address or "an embedded local Ray"
        raise SchedulingError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None


def embedded_session_dir() -> Path | None:
    """The session directory of the Ray this process started, while it runs; None where this Ray
    does not say (the attribute is Ray's own, not a public API)."""
    try:
        from ray._private import worker

        node: Any = getattr(worker, "_global_node", None)
        path = node.get_session_dir_path() if node is not None else None
    except (ImportError, AttributeError):
        return None
    return Path(path) if path else None


def stop_unused_head_processes() -> None:
    """An embedded Ray's autoscaler monitor and log monitor serve nothing here (one node, fixed
    resources, no logs sent to the driver) but take CPU from the job on a small host, and the
    monitor ignores SIGTERM: `ray.shutdown` waits a second for it before it kills it (measured:
    1.01 s of a 1.48 s shutdown). Stopped at once instead; where this Ray does not expose them
    (the attribute is Ray's own, not a public API), left to run."""
    try:
        from ray._private import worker

        node: Any = getattr(worker, "_global_node", None)
        if node is not None:
            node.kill_monitor(check_alive=False)
            node.kill_log_monitor(check_alive=False)
    except (ImportError, AttributeError):
        pass


def remove_session_dir(session_dir: Path) -> None:
    """Delete one Ray session directory, and Ray's `session_latest` link if it points there;
    nothing else in Ray's temp folder (other Rays, of other commands, may be using theirs)."""
    if not session_dir.name.startswith("session_") or not session_dir.is_dir():
        return
    shutil.rmtree(session_dir, ignore_errors=True)
    latest = session_dir.parent / "session_latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink() and Path(os.readlink(latest)).name == session_dir.name:
            latest.unlink()
