"""The peer: a TCP server on 127.0.0.1 that answers like an Android device's adbd.

One thread per connection reads packets; each stream's service (shell or sync) runs in
its own thread and writes with adbd's flow control (one WRTE in flight until OKAY).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from . import services, wire
from .battery import BatteryScript, ScriptedBattery
from .faults import Fault, Trigger
from .sandbox import Identity, Sandbox

OKAY_WAIT_S = 30.0


class Stream:
    def __init__(self, connection: Connection, local_id: int, remote_id: int) -> None:
        self.connection = connection
        self.local_id = local_id
        self.remote_id = remote_id
        self.on_host_close: Callable[[], None] = lambda: None
        self.corrupt_next = False
        self._okay = threading.Event()
        self._inbox = bytearray()
        self._cond = threading.Condition()
        self._closed = False
        self._write_lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._write_lock:
            self._write(data)

    def _write(self, data: bytes) -> None:
        step = self.connection.max_payload
        for start in range(0, len(data), step):
            if self._closed:
                raise EOFError("stream closed")
            self._okay.clear()
            corrupt, self.corrupt_next = self.corrupt_next, False
            self.connection.send(
                wire.Packet(wire.WRTE, self.local_id, self.remote_id, data[start : start + step]), corrupt
            )
            if not self._okay.wait(OKAY_WAIT_S) or self._closed:
                raise EOFError("host stopped acknowledging")

    def read_exact(self, size: int) -> bytes:
        with self._cond:
            while len(self._inbox) < size:
                if self._closed:
                    raise EOFError("stream closed")
                self._cond.wait(1.0)
            data = bytes(self._inbox[:size])
            del self._inbox[:size]
            return data

    def feed(self, data: bytes) -> None:
        with self._cond:
            self._inbox += data
            self._cond.notify_all()

    def acknowledged(self) -> None:
        self._okay.set()

    def close(self) -> None:
        """Close from the device side (the service finished)."""
        if self._mark_closed():
            self.connection.forget(self)
            self.connection.send(wire.Packet(wire.CLSE, self.local_id, self.remote_id))

    def closed_by_host(self) -> bool:
        """The host closed; True when the device side was still open (adbd answers CLSE)."""
        was_open = self._mark_closed()
        self.on_host_close()
        return was_open

    def _mark_closed(self) -> bool:
        with self._cond:
            was_open = not self._closed
            self._closed = True
            self._cond.notify_all()
        self._okay.set()
        return was_open


class Connection:
    def __init__(self, peer: AdbPeer, sock: socket.socket) -> None:
        self.peer = peer
        self.sock = sock
        self.max_payload = wire.DEVICE_MAX_PAYLOAD
        self.stalled = False
        self._verify = True
        self._send_lock = threading.Lock()
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._token = b""

    def send(self, packet: wire.Packet, corrupt: bool = False) -> None:
        if self.stalled:
            return
        with self._send_lock:
            self.sock.sendall(wire.encode(packet, corrupt))

    def serve(self) -> None:
        try:
            self._handshake()
            while True:
                packet = wire.read_packet(self.sock, self._verify)
                if not self.stalled:
                    self._dispatch(packet)
        except (OSError, EOFError, wire.ProtocolError):
            pass
        finally:
            self.drop()

    def drop(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for stream in list(self._streams.values()):
            stream.closed_by_host()
        self._streams.clear()

    def forget(self, stream: Stream) -> None:
        self._streams.pop(stream.local_id, None)

    def fire(self, fault: Fault, stream: Stream) -> None:
        fault.fired.set()

        def act() -> None:
            if fault.action == "drop":
                self.drop()
            elif fault.action == "stall":
                self.stalled = True
            else:
                stream.corrupt_next = True

        if fault.delay_s:
            timer = threading.Timer(fault.delay_s, act)
            timer.daemon = True
            timer.start()
        else:
            act()

    def _handshake(self) -> None:
        while True:
            packet = wire.read_packet(self.sock, verify_checksum=False)
            if packet.command == wire.CNXN:
                break
        version = min(packet.arg0, wire.VERSION_SKIP_CHECKSUM)
        self._verify = version < wire.VERSION_SKIP_CHECKSUM
        self.max_payload = max(4096, min(packet.arg1, wire.DEVICE_MAX_PAYLOAD))
        if self.peer.require_auth:
            self._authenticate()
        self.send(
            wire.Packet(
                wire.CNXN,
                version,
                wire.DEVICE_MAX_PAYLOAD,
                self.peer.sandbox.identity.banner(self.peer.features),
            )
        )

    def _authenticate(self) -> None:
        self._send_token()
        while True:
            packet = wire.read_packet(self.sock, self._verify)
            if packet.command != wire.AUTH:
                continue
            if packet.arg0 == wire.AUTH_SIGNATURE:
                if any(wire.signature_valid(k, self._token, packet.data) for k in self.peer.allowed_keys()):
                    return
                self._send_token()
            elif packet.arg0 == wire.AUTH_RSAPUBLICKEY and self.peer.accept_unknown_keys:
                # The user tapped "Allow": remember the key, as adbd writes adb_keys.
                self.peer.allow_key(packet.data)
                return
            # An unknown key with no one to accept it: a real phone waits on its prompt.

    def _send_token(self) -> None:
        self._token = os.urandom(wire.TOKEN_SIZE)
        self.send(wire.Packet(wire.AUTH, wire.AUTH_TOKEN, 0, self._token))

    def _dispatch(self, packet: wire.Packet) -> None:
        if packet.command == wire.OPEN:
            self._open(packet.arg0, packet.data.rstrip(b"\0").decode("utf-8", "replace"))
            return
        stream = self._streams.get(packet.arg1)
        if stream is None or stream.remote_id != packet.arg0:
            return
        if packet.command == wire.OKAY:
            stream.acknowledged()
        elif packet.command == wire.WRTE:
            stream.feed(packet.data)
            self.send(wire.Packet(wire.OKAY, stream.local_id, stream.remote_id))
        elif packet.command == wire.CLSE:
            self.forget(stream)
            if stream.closed_by_host():
                self.send(wire.Packet(wire.CLSE, stream.local_id, stream.remote_id))

    def _open(self, remote_id: int, service: str) -> None:
        kind, _, command = service.partition(":")
        # "shell,v2,raw:cmd" (Google's adb when the device offers shell_v2): options after commas.
        name, *options = kind.split(",")
        v2 = "v2" in options
        if name not in ("shell", "exec", "sync") or (v2 and not self.peer.shell_v2):
            self.send(wire.Packet(wire.CLSE, 0, remote_id))
            return
        stream = Stream(self, self._next_id, remote_id)
        self._next_id += 1
        self._streams[stream.local_id] = stream
        self.send(wire.Packet(wire.OKAY, stream.local_id, remote_id))
        if name == "sync":
            self.peer.track(
                services.start(lambda: services.run_sync(stream, lambda p: self.peer.fault("push", p)))
            )
        else:
            fault = self.peer.fault("shell", command)
            self.peer.track(services.start(lambda: services.run_shell(stream, command, fault, v2)))


class AdbPeer:
    """Serve ADB on 127.0.0.1:<free port> for `sandbox_dir`, as the device `identity`.

    `allowed_keys` are `adbkey.pub` contents; a host signing with another key is refused
    unless `accept_unknown_keys` (the user taps "Allow" on the phone).
    """

    def __init__(
        self,
        sandbox_dir: Path,
        identity: Identity,
        allowed_keys: Iterable[bytes] = (),
        *,
        require_auth: bool = True,
        accept_unknown_keys: bool = False,
        path_prepend: tuple[str, ...] = (),
        shell_v2: bool = False,
        battery: BatteryScript | None = None,
    ) -> None:
        if battery is not None:
            identity = dataclasses.replace(identity, dumpsys={**identity.dumpsys, "battery": battery.dumpsys})
        self.sandbox = Sandbox(sandbox_dir, identity, path_prepend)
        #: `battery`: the unit's scripted battery (sysfs and `dumpsys battery`); None: it has none
        self.battery = (
            ScriptedBattery(self.sandbox.root, battery, self.sandbox.session_ids) if battery else None
        )
        self.require_auth = require_auth
        self.accept_unknown_keys = accept_unknown_keys
        #: offer shell protocol v2 (separate stderr, exit status); adb-shell speaks only v1
        self.shell_v2 = shell_v2
        self.features: tuple[str, ...] = ("shell_v2", "cmd") if shell_v2 else ("cmd",)
        self.host = "127.0.0.1"
        self.port = 0
        self.faults: list[Fault] = []
        self.connections_served = 0
        #: device paths of every completed push, in order (what a test can count)
        self.pushed: list[str] = []
        self._keys = [wire.decode_public_key(k) for k in allowed_keys]
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._connections: list[Connection] = []
        self._listener: socket.socket | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> AdbPeer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(8)
        self.port = listener.getsockname()[1]
        self._listener = listener
        if self.battery is not None:
            self.battery.start()
        self.track(services.start(self._accept_loop))
        return self

    def stop(self) -> None:
        if self._listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone does not on Linux.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.drop()
        self.sandbox.kill_all()
        if self.battery is not None:
            self.battery.stop()
        for thread in list(self._threads):
            thread.join(timeout=5)

    def __enter__(self) -> AdbPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def fault(self, trigger: Trigger, subject: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(trigger, subject):
                    self.faults.remove(fault)
                    return fault
        return None

    def allowed_keys(self) -> list[RSAPublicKey]:
        with self._lock:
            return list(self._keys)

    def allow_key(self, public_key: bytes) -> None:
        with self._lock:
            self._keys.append(wire.decode_public_key(public_key))

    def track(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(self, sock)
            with self._lock:
                self._connections.append(connection)
                self.connections_served += 1
            self.track(services.start(connection.serve))
