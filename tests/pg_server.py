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
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database on the server; its URL."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)


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
    port = _free_port()
    subprocess.run(
        [*run_as, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        timeout=START_TIMEOUT_S,
    )
    log = open(root / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(
        [
            *run_as,
            str(bin_dir / "postgres"),
            "-D",
            str(data),
            "-c",
            "listen_addresses=127.0.0.1",
            "-p",
            str(port),
            "-c",
            f"unix_socket_directories={root}",
            "-c",
            "fsync=off",  # a test server: durability across power loss is not what is tested
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = PostgresServer(port, process)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"postgres exited: {(root / 'server.log').read_text()[-2000:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0 and "ready to accept" in (
                    root / "server.log"
                ).read_text(errors="replace"):
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("postgres did not start")
            time.sleep(0.1)
        yield server
    finally:
        # `runuser` waits for its child and forwards signals; its child is the postmaster.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)  # fast shutdown: the group is ours alone
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for a test module (import this fixture into the module)."""
    pytest.importorskip("psycopg")
    if postgres_bin() is None:
        pytest.skip("Debian's postgresql is not installed")
    with postgres_server() as server:
        yield server
