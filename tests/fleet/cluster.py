"""A real multi-node Ray cluster on this machine, for the fleet tests and the scheduler benchmark.

Each node is a `ray start --block` process in its own session, bound to its own loopback
address (127.0.0.1 is the head, 127.0.0.2... the workers), all under one temp dir and one
auth token. Every process started here is tracked by pid and killed, with its descendants,
when the cluster stops: nothing is found or killed by name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

VENV_BIN = Path(sys.executable).parent
#: node death is noticed within ~5 s instead of Ray's default ~30 s; tighter than this, a
#: raylet starved of CPU on a busy 2-core machine is declared dead while alive
FAST_HEALTH = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_port(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s}s")


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (a zombie has ended)."""
    left = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.add(pid)
        except psutil.NoSuchProcess:
            pass
    return left


def descendants_running(root_pid: int, script: Path) -> set[int]:
    """The pids below `root_pid` whose command line runs `script` (e.g. the host's session script)."""
    found = set()
    for child in psutil.Process(root_pid).children(recursive=True):
        try:
            if str(script) in child.cmdline():
                found.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process we started and every process below it."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)


@dataclass
class Node:
    name: str
    ip: str
    process: subprocess.Popen[bytes]
    #: processes below this node's `ray start` (raylet, workers): collected while the node runs,
    #: because a worker re-parented after its raylet died is still ours to stop
    pids: set[int] = field(default_factory=set)

    def remember_descendants(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self.pids |= {p.pid for p in psutil.Process(self.process.pid).children(recursive=True)}

    def kill(self) -> None:
        self.remember_descendants()
        kill_tree(self.process.pid)
        for pid in self.pids:
            kill_tree(pid)


@dataclass
class LocalCluster:
    root: Path
    env: dict[str, str]
    port: int
    nodes: list[Node] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _ray_start(
        self, name: str, ip: str, args: list[str], num_cpus: int, prefix: tuple[str, ...] = ()
    ) -> Node:
        """`prefix`: a command the node's `ray start` runs under (e.g. another mount namespace)."""
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the node
        command = [
            *prefix,
            str(VENV_BIN / "ray"),
            "start",
            "--block",
            f"--node-ip-address={ip}",
            f"--num-cpus={num_cpus}",
            "--object-store-memory=80000000",
            "--disable-usage-stats",
            f"--temp-dir={self.root / 'ray'}",
            *args,
        ]
        process = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        node = Node(name, ip, process)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: int = 1) -> None:
        self._ray_start(
            "head", "127.0.0.1", ["--head", f"--port={self.port}", "--include-dashboard=false"], num_cpus
        )
        wait_port("127.0.0.1", self.port, 60)

    def add_node(
        self,
        name: str,
        ip: str,
        num_cpus: int = 1,
        attempts: int = 3,
        timeout_s: float = 120,
        prefix: tuple[str, ...] = (),
    ) -> Node:
        """Start a worker node and wait until it runs. On a loaded machine a worker's first RPCs to
        the GCS can time out and its `ray start` exits: it is started again, up to `attempts` times."""
        for attempt in range(attempts):
            node = self._ray_start(name, ip, [f"--address={self.address}"], num_cpus, prefix)
            deadline = time.monotonic() + timeout_s
            while "Ray runtime started" not in self.log(name):
                if node.process.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            else:
                return node
            node.kill()
            self.nodes.remove(node)
            if attempt == attempts - 1:
                raise TimeoutError(f"Ray node {name} did not start:\n{self.log(name)[-2000:]}")
        raise AssertionError("unreachable")

    def wait_nodes(self, count: int, timeout_s: float = 120) -> None:
        """Until every node's `ray start` says it started, and the GCS counts `count` alive."""
        deadline = time.monotonic() + timeout_s
        while not all("Ray runtime started" in self.log(n.name) for n in self.nodes):
            dead = [n.name for n in self.nodes if n.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                tails = "\n".join(f"--- {n}:\n{self.log(n)[-2000:]}" for n in dead)
                raise TimeoutError(f"Ray nodes did not start (exited: {dead})\n{tails}")
            time.sleep(0.3)
        script = (
            "import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR');"
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        while time.monotonic() < deadline:
            done = subprocess.run(
                [sys.executable, "-c", script, self.address],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode == 0 and done.stdout.strip().isdigit() and int(done.stdout) >= count:
                for node in self.nodes:
                    node.remember_descendants()
                return
            time.sleep(1.0)
        raise TimeoutError(f"fewer than {count} Ray nodes alive after {timeout_s}s")

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        process = subprocess.Popen(
            args,
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def farm(
        self, *args: str, env: dict[str, str] | None = None, timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(VENV_BIN / "farm"), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for process in reversed(self.processes):
            kill_tree(process.pid)
        for node in reversed(self.nodes):
            node.kill()
        if not os.environ.get("FARM_TEST_KEEP_CLUSTER"):  # set it to read the nodes' logs after a failure
            shutil.rmtree(self.root, ignore_errors=True)


def new_cluster(extra_env: dict[str, str] | None = None) -> LocalCluster:
    # short: Ray's unix socket paths live under it and must stay under ~107 characters
    root = Path(tempfile.mkdtemp(prefix="frm", dir="/tmp"))
    token = root / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
        **FAST_HEALTH,
        **(extra_env or {}),
    }
    env.pop("RAY_ADDRESS", None)
    return LocalCluster(root=root, env=env, port=free_port())
