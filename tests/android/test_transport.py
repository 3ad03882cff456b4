"""The typed ADB connection: keys, auth, exit codes, and adb-shell's errors as the farm's."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ondevice_farm.errors import DeviceAuthError, DeviceLostError
from ondevice_farm_agents.android.keys import load_signer
from ondevice_farm_agents.android.transport import AdbConnection
from tests.android.peer_fixtures import PeerHandle, make_key, start_peer


def test_a_missing_key_is_generated_and_then_reused(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "adbkey"
    first = load_signer(key)
    assert key.exists() and Path(f"{key}.pub").exists()
    assert load_signer(key).GetPublicKey() == first.GetPublicKey()


def test_shell_reports_output_and_exit_status(adb_peer: PeerHandle) -> None:
    conn = AdbConnection(f"tcp:{adb_peer.address}", load_signer(adb_peer.key_path), io_timeout_s=5)
    try:
        ok = conn.shell("printf 'a\\nb'; true")
        failed = conn.shell("echo oops; exit 3")
    finally:
        conn.close()
    assert (ok.output, ok.exit_code) == ("a\nb", 0)
    assert (failed.output, failed.exit_code) == ("oops\n", 3)


def test_push_and_pull_round_trip(adb_peer: PeerHandle, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4000
    (tmp_path / "up").write_bytes(data)
    conn = AdbConnection(f"tcp:{adb_peer.address}", load_signer(adb_peer.key_path), io_timeout_s=5)
    try:
        conn.push(tmp_path / "up", "/data/local/tmp/farm/x.bin")
        conn.pull("/data/local/tmp/farm/x.bin", tmp_path / "down")
    finally:
        conn.close()
    assert (tmp_path / "down").read_bytes() == data


def test_a_key_the_device_refuses_is_an_auth_error(tmp_path: Path, adb_key: Path) -> None:
    peer = start_peer(tmp_path / "device", make_key(tmp_path / "other"))
    conn = AdbConnection(f"tcp:{peer.address}", load_signer(adb_key), io_timeout_s=1)
    try:
        with pytest.raises(DeviceAuthError, match="did not accept"):
            conn.connect()
    finally:
        conn.close()
        peer.stop()


def test_a_new_key_the_user_allows_is_accepted(tmp_path: Path, adb_key: Path) -> None:
    peer = start_peer(tmp_path / "device", make_key(tmp_path / "other"), accept_unknown_keys=True)
    conn = AdbConnection(f"tcp:{peer.address}", load_signer(adb_key), io_timeout_s=5)
    try:
        assert conn.shell("echo in").output == "in\n"
    finally:
        conn.close()
        peer.stop()


def test_nothing_listening_is_a_lost_device(adb_key: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conn = AdbConnection(f"tcp:127.0.0.1:{port}", load_signer(adb_key), io_timeout_s=1)
    with pytest.raises(DeviceLostError):
        conn.shell("true")
