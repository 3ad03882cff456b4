"""Where `farm serve`'s embedded Ray listens on an ordinary host, and that its log says so truly.

Every other test runs in a network namespace with only `lo`, where Ray finds no other address to
take: it cannot show what a host with a network does. Here `farm serve` runs in a namespace of its
own with a second, non-loopback interface and a default route (the shape of a lab host: Ray's
"node IP from the perspective of the internet" is 10.77.0.1 there, and no packet leaves). Its
listening sockets are counted with `ss -ltnp` inside that namespace, by the pids of farm serve's
process tree, and compared with what it logged:

- by default every socket of the tree is bound to loopback, and the log lists Ray's ports as such;
- with `--bind 10.77.0.1` Ray binds most ports on every interface (its gRPC servers bind loopback
  or all, never one chosen address; its agents' HTTP ports bind the node address), and the log
  says so, port by port, with what guards them: the token, and which answer without it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.fleet.conftest import wait_for
from tests.fleet.serve import Serving, farm_serve

pytestmark = pytest.mark.slow

HOST_ADDRESS = "10.77.0.1"
#: a lab host's network, in a namespace of its own: lo, and an Ethernet-like interface (one end of a
#: veth pair: this kernel may lack the dummy driver) with an address and a default route
INTERFACE = "ip link add veth0 type veth peer name veth1"
NETWORK = (
    f"ip link set lo up && {INTERFACE} && ip addr add {HOST_ADDRESS}/24 dev veth0 && "
    "ip link set veth1 up && ip link set veth0 up && ip route add default via 10.77.0.2 dev veth0 && "
    'exec "$@"'
)
#: `ss -ltnpH`: state, queues, local address:port, peer, users:(("name",pid=N,fd=M),...)
_SS_LINE = re.compile(r"^\S+\s+\d+\s+\d+\s+(\S+):(\d+)\s+\S+\s*(.*)$")
_SS_PID = re.compile(r"pid=(\d+)")
#: a socket as farm serve's log names it: `raylet 127.0.0.1:41431`, `gcs_server [::]:40379`
_LOGGED = re.compile(r"(\S+) \[?([0-9a-fA-F.:]+?)\]?:(\d+)\b")


def _can_make_namespaces() -> bool:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("ip") and shutil.which("nsenter")):
        return False
    made = subprocess.run(["unshare", "-n", "sh", "-c", INTERFACE], capture_output=True, check=False)
    return made.returncode == 0


@dataclass(frozen=True)
class Socket:
    address: str
    port: int
    pids: frozenset[int]

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback

    @property
    def every_interface(self) -> bool:
        return ipaddress.ip_address(self.address).is_unspecified


def listening(pid: int) -> list[Socket]:
    """The TCP sockets in LISTEN state in `pid`'s network namespace, as `ss -ltnp` shows them."""
    shown = subprocess.run(
        ["nsenter", f"--net=/proc/{pid}/ns/net", "ss", "-ltnpH"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    sockets = []
    for line in shown.stdout.splitlines():
        found = _SS_LINE.match(line.strip())
        assert found, f"unexpected `ss` line: {line}"
        # `*`: a dual-stack socket on every address, IPv4 and IPv6; [::ffff:127.0.0.1]: IPv4's loopback
        address = ipaddress.ip_address(found.group(1).strip("[]").split("%")[0].replace("*", "::"))
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        pids = frozenset(int(p) for p in _SS_PID.findall(found.group(3)))
        sockets.append(Socket(str(address), int(found.group(2)), pids))
    return sockets


#: an HTTP GET without any token, from inside the namespace: its status, or 0 for no HTTP answer
_HTTP_STATUS = """
import http.client, sys
connection = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=2)
try:
    connection.request("GET", "/")
    print(connection.getresponse().status)
except (OSError, http.client.HTTPException):
    print(0)
"""


def http_status(pid: int, host: str, port: int) -> int:
    asked = subprocess.run(
        ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", _HTTP_STATUS, host, str(port)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(asked.stdout.strip())


def tree(pid: int) -> set[int]:
    return {pid} | {child.pid for child in psutil.Process(pid).children(recursive=True)}


def actor_running(pid: int) -> bool:
    """The host unit's DeviceActor is up below `pid` (its worker listens too)."""
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "DeviceActor" in " ".join(child.cmdline()):
                return True
        except psutil.NoSuchProcess:
            pass
    return False


@contextmanager
def serve_on_a_networked_host(tmp_path: Path, *args: str) -> Iterator[tuple[Serving, str]]:
    """`farm serve ARGS` in a namespace with a second interface; with the line it logged about
    where Ray listens."""
    with farm_serve(
        tmp_path / "home", tmp_path / "farm", *args, wrapper=("unshare", "-n", "sh", "-c", NETWORK, "sh")
    ) as serving:
        assert serving.process.stderr is not None
        said = ""
        for _ in range(10):
            line = serving.process.stderr.readline()
            if line.startswith("Ray listens") or line.startswith("where Ray listens"):
                said = line.strip()
                break
        assert said, "farm serve said nothing about where Ray listens"
        yield serving, said


def logged_ports(said: str) -> dict[int, str]:
    """port -> address, of each socket a part of the log line names (`process address:port`)."""
    return {int(m.group(3)): m.group(2) for m in _LOGGED.finditer(said)}


@pytest.fixture(autouse=True)
def namespaces() -> None:
    if not _can_make_namespaces():
        pytest.skip("needs root, unshare, nsenter and ip (a network namespace with a veth interface)")


def test_by_default_every_port_of_the_embedded_ray_is_on_loopback_and_the_log_says_which(
    tmp_path: Path,
) -> None:
    for name in ("home", "farm"):
        (tmp_path / name).mkdir()
    with serve_on_a_networked_host(tmp_path) as (serving, said):
        assert serving.address.startswith("127.0.0.1:"), serving.address
        wait_for(lambda: actor_running(serving.process.pid), 60, "the host unit's DeviceActor")
        sockets = [s for s in listening(serving.process.pid) if s.pids & tree(serving.process.pid)]
    assert sockets, "farm serve's tree listens nowhere?"
    off_loopback = [s for s in sockets if not s.loopback]
    assert not off_loopback, f"listening beyond loopback: {off_loopback}; farm serve said: {said}"
    assert said.startswith("Ray listens on loopback only"), said
    # every port the log names is one the kernel shows bound to loopback, at the address it names
    shown = {s.port: s.address for s in sockets}
    named = logged_ports(said.split(": ", 1)[1])
    assert named and all(shown.get(port) == address for port, address in named.items()), (said, shown)
    print(f"{len(sockets)} listening sockets in farm serve's tree, all on loopback; it said: {said}")


def test_bound_to_the_hosts_address_the_log_names_every_open_port_and_its_guard(tmp_path: Path) -> None:
    for name in ("home", "farm"):
        (tmp_path / name).mkdir()
    with serve_on_a_networked_host(tmp_path, "--bind", HOST_ADDRESS) as (serving, said):
        assert serving.address.startswith(f"{HOST_ADDRESS}:"), serving.address
        sockets = [s for s in listening(serving.process.pid) if s.pids & tree(serving.process.pid)]
        exposed = {s.port for s in sockets if not s.loopback}
        # what answers a stranger without the token, asked from the host's own address
        answering = {port for port in exposed if http_status(serving.process.pid, HOST_ADDRESS, port) == 200}
    assert exposed, "bound to the host's address, Ray listens beyond loopback"
    assert said.startswith("Ray listens beyond loopback"), said
    assert "token auth is on" in said and "docs/deploy.md" in said
    named = logged_ports(said.split(": ", 1)[1])
    # each port the log names as open to other hosts is open, on the address it names
    said_exposed = {port for port, address in named.items() if not ipaddress.ip_address(address).is_loopback}
    assert said_exposed and said_exposed <= exposed, (said, sorted(exposed))
    shown = {s.port: s for s in sockets if not s.loopback}
    assert all(ipaddress.ip_address(shown[p].address) == ipaddress.ip_address(named[p]) for p in said_exposed)
    # the ports it says answer without the token are those that do, and only those
    said_answering = set(logged_ports(said.split("but for ", 1)[1])) if "but for " in said else set()
    assert said_answering == answering & said_exposed, (said, sorted(answering))
    print(f"bound to {HOST_ADDRESS}: {len(exposed)} ports open beyond loopback; it said: {said}")
