"""A real PostgreSQL server for the tests: Debian's binaries, a fresh cluster in a temp dir,
listening on a loopback port only, started and stopped by pid (never by name).

PostgreSQL refuses to run as root: as root, the cluster belongs to `nobody` and runs as it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
USER = "farm"


def postgres_bin() -> Path | None:
    """The newest installed server's bin dir (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    port: int
    root: Path
    run_as: list[str]
    bin_dir: Path
    #: the postmaster (through `runuser` as root), None until `start`
    process: subprocess.Popen[bytes] | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database on the server; its URL."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def start(self) -> None:
        """The postmaster on this server's data and port (again, after `stop`)."""
        log_path = self.root / "server.log"
        began_at = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *self.run_as,
                    str(self.bin_dir / "postgres"),
                    "-D",
                    str(self.root / "data"),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-p",
                    str(self.port),
                    "-c",
                    f"unix_socket_directories={self.root}",
                    "-c",
                    "fsync=off",  # a test server: durability across power loss is not what is tested
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = self.process
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"postgres exited: {log_path.read_text(errors='replace')[-2000:]}")
            with socket.socket() as sock:
                fresh = log_path.read_bytes()[began_at:].decode(errors="replace")
                if sock.connect_ex(("127.0.0.1", self.port)) == 0 and "ready to accept" in fresh:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("postgres did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        """A fast shutdown of the postmaster this server started (its own process group)."""
        if self.process is None:
            return
        # `runuser` waits for its child and forwards signals; its child is the postmaster.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server binaries under /usr/lib/postgresql")
    root = Path(tempfile.mkdtemp(prefix="farm-pg-"))
    run_as: list[str] = []
    if os.getuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chmod(root, 0o755)
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        run_as = ["runuser", "-u", "nobody", "--"]
    data = root / "data"
    try:
        subprocess.run(
            [*run_as, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        server = PostgresServer(_free_port(), root, run_as, bin_dir)
        try:
            server.start()
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for a test module (import this fixture into the module)."""
    pytest.importorskip("psycopg")
    if postgres_bin() is None:
        pytest.skip("Debian's postgresql is not installed")
    with postgres_server() as server:
        yield server
