"""Where the processes of an embedded Ray listen, read from the kernel (Linux /proc).

`farm serve` says where its Ray can be reached; a statement about security must be what the
kernel shows, not what the farm asked for: Ray picks its own addresses (it binds either loopback
or every interface, never one chosen address) and starts processes of its own (GCS, raylet,
agents, one per worker, and this process's own core worker), each with its own ports. This reads
the TCP sockets in LISTEN state of this process and its descendants (the embedded Ray's
processes) but for the ports of the farm's own servers, and asks each port open beyond loopback
whether it answers an HTTP request that carries no token (Ray's Prometheus metrics endpoints do;
its gRPC servers and agents' APIs want the token). Standard library only; off Linux it finds
nothing and says so.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
#: /proc/net/tcp's state column: 0A is LISTEN
TCP_LISTEN = "0A"
#: how long the probe of one port waits for an answer
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True, order=True)
class Listener:
    """One listening TCP socket: the address it is bound to, its port, and who holds it."""

    address: str
    port: int
    pid: int
    process: str

    @property
    def loopback_only(self) -> bool:
        """Bound to a loopback address: nothing off this host reaches it."""
        return ipaddress.ip_address(self.address).is_loopback

    @property
    def every_interface(self) -> bool:
        """Bound to 0.0.0.0 or [::]: reachable on every address this host has."""
        return ipaddress.ip_address(self.address).is_unspecified

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.process} {host}:{self.port}"


def _address(hex_address: str) -> str:
    """/proc/net/tcp's "0100007F" (IPv4) or 32 hex digits (IPv6): each 32-bit word in host order.
    An IPv4-mapped IPv6 address (a gRPC server bound to 127.0.0.1) is given as its IPv4 address."""
    raw = bytes.fromhex(hex_address)
    address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def listening_inodes() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every TCP socket in LISTEN state in this network namespace."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_LISTEN:
                continue
            hex_address, hex_port = fields[1].split(":")
            found[int(fields[9])] = (_address(hex_address), int(hex_port, 16))
    return found


def _parent(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": the command name may hold spaces and parentheses
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def descendants(root: int) -> set[int]:
    """Every process below `root` now (root excluded)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            parent = _parent(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _name(pid: int) -> str:
    """The program a process runs: Ray's own title where it set one (`ray::...`), else its binary
    or script."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    first = words[0].split()[0]
    if first.startswith("ray::"):
        return first
    # `python .../dashboard/agent.py ...`, `python .venv/bin/farm serve`: the script says more
    # than the interpreter
    if Path(first).name.startswith("python") and len(words) > 1 and not words[1].startswith("-"):
        return Path(words[1]).name
    return Path(first).name


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def listeners_of(pids: set[int]) -> list[Listener]:
    """The listening TCP sockets the processes `pids` hold, sorted by process and port."""
    listening = listening_inodes()
    found = set()
    for pid in pids:
        for inode in _socket_inodes(pid) & listening.keys():
            address, port = listening[inode]
            found.add(Listener(address, port, pid, _name(pid)))
    return sorted(found, key=lambda item: (item.process, item.port, item.address))


def embedded_ray_listeners(farm_ports: Collection[int] = ()) -> list[Listener]:
    """What the Ray this process started listens on: its descendants' sockets and this process's
    own (the driver's core worker), but for `farm_ports`, the farm's own servers in this process
    (the submit API, /metrics), which say where they listen themselves."""
    me = os.getpid()
    return [
        item
        for item in listeners_of(descendants(me) | {me})
        if not (item.pid == me and item.port in farm_ports)
    ]


def answers_without_token(listener: Listener) -> bool:
    """Whether the port answers an HTTP GET that carries no token with 200 (asked over loopback
    where it listens there too). A gRPC server's reply is no HTTP/1.1: not an answer."""
    host = "127.0.0.1" if listener.every_interface else listener.address
    connection = http.client.HTTPConnection(host, listener.port, timeout=PROBE_TIMEOUT_S)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == http.client.OK
    except (OSError, http.client.HTTPException):
        return False
    finally:
        with contextlib.suppress(OSError):
            connection.close()


def describe(listeners: list[Listener], token_auth: bool, open_to_anyone: Collection[Listener] = ()) -> str:
    """One line for the operator: which of Ray's ports are open on which addresses, and what
    guards those other hosts can reach (`open_to_anyone`: those `answers_without_token` found)."""
    if not listeners:
        return "where Ray listens cannot be read here (no Linux /proc): see docs/deploy.md"
    listed = ", ".join(str(item) for item in listeners)
    exposed = [item for item in listeners if not item.loopback_only]
    if not exposed:
        return f"Ray listens on loopback only, where no other host reaches it: {listed}"
    where = "on every interface" if all(item.every_interface for item in exposed) else "beyond loopback"
    if not token_auth:
        guard = "token auth is OFF (RAY_AUTH_MODE): whoever reaches them can run code on this host"
    else:
        guard = "each wants the Ray token (token auth is on)"
        anyone = [item for item in exposed if item in open_to_anyone]
        if anyone:
            guard = (
                "the Ray token guards them (token auth is on) but for "
                + ", ".join(str(item) for item in anyone)
                + ", which answer an HTTP request without it (200)"
            )
    return (
        f"Ray listens {where} ({len(exposed)} of its {len(listeners)} ports): {listed}; {guard}; "
        "firewall them to the lab's hosts (docs/deploy.md)"
    )
