"""The peer's fidelity, checked with Google's own client (Debian's `adb`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.android.peer_fixtures import PeerHandle, make_key, start_peer

Adb = Callable[..., subprocess.CompletedProcess[str]]
pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="Google's adb client is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def adb(tmp_path: Path) -> Iterator[tuple[Adb, Path]]:
    """Run `adb` with its own server port and HOME (its key in HOME/.android/adbkey)."""
    home = tmp_path / "home"
    key = make_key(home / ".android")
    env = dict(os.environ, HOME=str(home), ANDROID_ADB_SERVER_PORT=str(_free_port()))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["adb", *args], env=env, capture_output=True, text=True, timeout=20)

    try:
        yield run, key
    finally:
        run("kill-server")


def test_adb_connects_runs_shell_and_pushes_and_pulls(adb: tuple[Adb, Path], tmp_path: Path) -> None:
    run, key = adb
    peer = start_peer(tmp_path / "device", key)
    handle = PeerHandle(peer.host, peer.port, key, peer.sandbox.root, peer)
    try:
        assert f"connected to {handle.address}" in run("connect", handle.address).stdout
        devices = run("devices", "-l").stdout
        assert f"{handle.address}" in devices and "model:Linux_ADB_Board" in devices
        assert run("-s", handle.address, "shell", "echo", "hello", "from", "adb").stdout == "hello from adb\n"
        assert run("-s", handle.address, "shell", "getprop ro.product.model").stdout == "Linux ADB Board\n"
        payload = os.urandom(300_000)
        (tmp_path / "up.bin").write_bytes(payload)
        pushed = run("-s", handle.address, "push", str(tmp_path / "up.bin"), "/data/local/tmp/up.bin")
        assert pushed.returncode == 0, pushed.stderr
        assert (handle.sandbox / "data/local/tmp/up.bin").read_bytes() == payload
        pulled = run("-s", handle.address, "pull", "/data/local/tmp/up.bin", str(tmp_path / "down.bin"))
        assert pulled.returncode == 0, pulled.stderr
        assert (tmp_path / "down.bin").read_bytes() == payload
    finally:
        peer.stop()


def test_adb_with_a_key_the_device_does_not_know_is_unauthorized(
    adb: tuple[Adb, Path], tmp_path: Path
) -> None:
    run, _key = adb
    stranger = make_key(tmp_path / "stranger")
    peer = start_peer(tmp_path / "device", stranger)
    try:
        run("connect", peer.address)
        assert f"{peer.address}\tunauthorized" in run("devices").stdout
        assert run("-s", peer.address, "shell", "echo", "x").returncode != 0
    finally:
        peer.stop()


def test_adb_over_shell_v2_gets_stderr_apart_and_the_exit_status(
    adb: tuple[Adb, Path], tmp_path: Path
) -> None:
    run, key = adb
    peer = start_peer(tmp_path / "device", key, shell_v2=True)
    try:
        run("connect", peer.address)
        assert "shell_v2" in run("-s", peer.address, "features").stdout
        result = run("-s", peer.address, "shell", "echo out; echo err >&2; exit 3")
    finally:
        peer.stop()
    assert (result.stdout, result.stderr, result.returncode) == ("out\n", "err\n", 3)
