"""Fixtures that start an ADB peer on loopback, for these tests and for anyone's end-to-end test.

    from tests.android.peer_fixtures import adb_key, adb_peer, android_settings  # noqa: F401

`adb_peer` yields a `PeerHandle` (host, port, address, key_path, sandbox, peer) for a Linux
board whose `getprop` says `ro.product.model=Linux ADB Board` (the `linux-adb` profile), whose
`python3` is this interpreter (so the farm runner finds onnxruntime), and which accepts only
the test key. `android_settings` points an `AgentSettings` at it. `pixel8_peer` is the same peer
answering getprop as a Pixel 8 (the `pixel8` profile: the native runner).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ondevice_farm.profiles import load_profiles
from ondevice_farm_agents.android.agent import AndroidAgent
from ondevice_farm_agents.base import AgentSettings, DeviceUnit
from tests.android.adb_peer import AdbPeer, Identity

LINUX_BOARD = {
    "ro.product.model": "Linux ADB Board",
    "ro.product.manufacturer": "farm",
    "ro.product.name": "linux_adb",
    "ro.product.device": "linux_adb",
    "ro.board.platform": "linux",
    "ro.build.version.sdk": "34",
    "ro.build.version.release": "14",
    "ro.product.cpu.abi": "x86_64",
}
#: what a Pixel 8 answers to getprop (recorded keys), except `ro.product.cpu.abi`: the peer runs
#: the host's x86-64 programs in its sandbox, as a Cuttlefish/emulator Pixel image would, so the
#: agent pushes the x86-64 build of the native runner (an arm64-v8a phone gets the NDK build)
PIXEL8 = {
    "ro.product.model": "Pixel 8",
    "ro.product.manufacturer": "Google",
    "ro.product.name": "shiba",
    "ro.product.device": "shiba",
    "ro.board.platform": "zuma",
    "ro.soc.manufacturer": "Google",
    "ro.soc.model": "Tensor G3",
    "ro.hardware": "shiba",
    "ro.build.version.sdk": "34",
    "ro.build.version.release": "14",
    "ro.product.cpu.abi": "x86_64",
}
PEER_IO_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class PeerHandle:
    host: str
    port: int
    key_path: Path
    sandbox: Path
    peer: AdbPeer

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def make_key(directory: Path) -> Path:
    from adb_shell.auth.keygen import keygen

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "adbkey"
    keygen(str(path))
    return path


def start_peer(
    sandbox: Path, key_path: Path, properties: dict[str, str] | None = None, **kwargs: object
) -> AdbPeer:
    identity = Identity(properties or LINUX_BOARD, kwargs.pop("dumpsys", {}))  # type: ignore[arg-type]
    return AdbPeer(
        sandbox,
        identity,
        [Path(f"{key_path}.pub").read_bytes()],
        path_prepend=(str(Path(sys.executable).parent),),
        **kwargs,  # type: ignore[arg-type]
    ).start()


@pytest.fixture(scope="session")
def adb_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_key(tmp_path_factory.mktemp("adbkey"))


@pytest.fixture
def adb_peer(tmp_path: Path, adb_key: Path) -> Iterator[PeerHandle]:
    peer = start_peer(tmp_path / "device", adb_key)
    try:
        yield PeerHandle(peer.host, peer.port, adb_key, peer.sandbox.root, peer)
    finally:
        peer.stop()


@pytest.fixture
def pixel8_peer(tmp_path: Path, adb_key: Path) -> Iterator[PeerHandle]:
    peer = start_peer(tmp_path / "pixel8", adb_key, PIXEL8)
    try:
        yield PeerHandle(peer.host, peer.port, adb_key, peer.sandbox.root, peer)
    finally:
        peer.stop()


def peer_settings(peer: PeerHandle) -> AgentSettings:
    """An `AgentSettings` with the shipped profiles, reaching `peer` alone with the test key."""
    return AgentSettings(
        profiles=load_profiles(),
        adb_tcp_addresses=(peer.address,),
        adb_key_path=peer.key_path,
        io_timeout_s=PEER_IO_TIMEOUT_S,
    )


@pytest.fixture
def android_settings(adb_peer: PeerHandle) -> AgentSettings:
    return peer_settings(adb_peer)


@contextmanager
def one_unit(settings: AgentSettings) -> Iterator[tuple[AndroidAgent, DeviceUnit]]:
    """An `AndroidAgent` on `settings` and the one unit it finds; the agent is closed afterwards."""
    agent = AndroidAgent(settings)
    try:
        (unit,) = agent.discover()
        yield agent, unit
    finally:
        agent.close()
