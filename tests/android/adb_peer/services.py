"""The two services the peer offers on a stream: `shell:`/`exec:` (v1, raw) and `sync:`."""

from __future__ import annotations

import os
import stat
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .faults import Fault

if TYPE_CHECKING:
    from .server import Stream

SYNC_DATA_MAX = 64 * 1024
_ID = struct.Struct("<4sI")


SHELL_V2_STDOUT, SHELL_V2_STDERR, SHELL_V2_EXIT = 1, 2, 3


def _v2_packet(kind: int, data: bytes) -> bytes:
    """Shell protocol v2 framing: one id byte, a little-endian uint32 length, the data."""
    return struct.pack("<BI", kind, len(data)) + data


def _pump(
    fd: int, emit: Callable[[bytes], None], map_text: Callable[[bytes], bytes], on_sent: Callable[[int], None]
) -> None:
    sent = 0
    pending = b""
    while chunk := os.read(fd, 65536):
        pending += chunk
        # Map whole lines only, so a sandbox path never straddles two reads.
        cut = pending.rfind(b"\n") + 1
        if cut:
            out, pending = pending[:cut], pending[cut:]
            emit(map_text(out))
            sent += len(out)
            on_sent(sent)
    if pending:
        emit(map_text(pending))


def run_shell(stream: Stream, command: str, fault: Fault | None, v2: bool = False) -> None:
    """v1: stdout and stderr merged, raw, no exit status. v2: framed stdout/stderr, then the exit status."""
    sandbox = stream.connection.peer.sandbox
    proc = sandbox.spawn(command, merge_stderr=not v2)
    stream.on_host_close = lambda: sandbox.kill(proc)
    assert proc.stdout is not None

    def fire_after(sent: int) -> None:
        if fault is not None and not fault.fired.is_set() and sent >= fault.after_bytes:
            stream.connection.fire(fault, stream)

    try:
        if fault is not None and fault.after_bytes == 0:
            stream.connection.fire(fault, stream)
        if not v2:
            _pump(proc.stdout.fileno(), stream.write, sandbox.to_device_text, fire_after)
            proc.wait()
        else:
            assert proc.stderr is not None
            err_fd = proc.stderr.fileno()
            errors = threading.Thread(
                target=_pump,
                args=(
                    err_fd,
                    lambda b: stream.write(_v2_packet(SHELL_V2_STDERR, b)),
                    sandbox.to_device_text,
                    lambda _: None,
                ),
                daemon=True,
            )
            errors.start()
            _pump(
                proc.stdout.fileno(),
                lambda b: stream.write(_v2_packet(SHELL_V2_STDOUT, b)),
                sandbox.to_device_text,
                fire_after,
            )
            errors.join()
            stream.write(_v2_packet(SHELL_V2_EXIT, bytes([proc.wait() & 0xFF])))
        stream.close()
    except (OSError, EOFError):
        sandbox.kill(proc)
    finally:
        if proc.poll() is not None:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


def run_sync(stream: Stream, find_fault: Callable[[str], Fault | None]) -> None:
    sandbox = stream.connection.peer.sandbox
    try:
        while True:
            request, length = _ID.unpack(stream.read_exact(_ID.size))
            if request == b"QUIT":
                stream.close()
                return
            if length > 1024:
                raise EOFError("path too long")
            path = stream.read_exact(length).decode("utf-8", "replace")
            if request == b"STAT":
                stream.write(b"STAT" + _stat(sandbox.host_path, path))
            elif request == b"LIST":
                stream.write(_list(sandbox.host_path, path))
            elif request == b"RECV":
                _recv(stream, sandbox.host_path, path)
            elif request == b"SEND":
                _send(stream, sandbox.host_path, path, find_fault)
            else:
                stream.write(_fail(f"unknown sync request {request!r}"))
                stream.close()
                return
    except (OSError, EOFError):
        stream.close()


def _fail(message: str) -> bytes:
    data = message.encode()
    return _ID.pack(b"FAIL", len(data)) + data


def _stat(host_path: Callable[[str], Path], path: str) -> bytes:
    try:
        st = os.lstat(host_path(path))
    except (OSError, PermissionError):
        return struct.pack("<3I", 0, 0, 0)
    return struct.pack("<3I", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))


def _list(host_path: Callable[[str], Path], path: str) -> bytes:
    out = bytearray()
    try:
        directory = host_path(path)
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
        directory = Path("/nonexistent")
    for name in [".", "..", *names]:
        try:
            st = os.lstat(os.path.join(directory, name))
        except OSError:
            continue
        raw = name.encode()
        out += (
            b"DENT"
            + struct.pack("<4I", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(raw))
            + raw
        )
    return bytes(out + b"DONE" + struct.pack("<4I", 0, 0, 0, 0))


def _recv(stream: Stream, host_path: Callable[[str], Path], path: str) -> None:
    try:
        with open(host_path(path), "rb") as handle:
            while chunk := handle.read(SYNC_DATA_MAX):
                stream.write(_ID.pack(b"DATA", len(chunk)) + chunk)
    except OSError as exc:
        stream.write(_fail(f"{path}: {exc.strerror or exc}"))
        return
    stream.write(_ID.pack(b"DONE", 0))


def _send(
    stream: Stream, host_path: Callable[[str], Path], spec: str, find_fault: Callable[[str], Fault | None]
) -> None:
    path, _, mode_text = spec.rpartition(",")
    error = ""
    target = Path("/nonexistent")
    handle = None
    try:
        target = host_path(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        handle = open(target, "wb")  # noqa: SIM115
    except (OSError, PermissionError) as exc:
        error = f"couldn't create file: {exc.strerror or exc}"
    fault = find_fault(path)
    received = 0
    try:
        while True:
            kind, size = _ID.unpack(stream.read_exact(_ID.size))
            if kind == b"DONE":
                mtime = size
                break
            if kind != b"DATA" or size > SYNC_DATA_MAX:
                raise EOFError(f"bad sync packet {kind!r}")
            data = stream.read_exact(size)
            if handle is not None:
                handle.write(data)
            received += size
            if fault is not None and not fault.fired.is_set() and received >= fault.after_bytes:
                stream.connection.fire(fault, stream)
    except (OSError, EOFError):
        # adbd unlinks what it was writing when the transfer fails; so does the peer.
        if handle is not None:
            handle.close()
            os.unlink(target)
        raise
    if handle is not None:
        handle.close()
        mode = int(mode_text) if mode_text.isdigit() else 0o644
        if stat.S_IMODE(mode):
            os.chmod(target, stat.S_IMODE(mode))
        os.utime(target, (mtime, mtime))
    if not error:
        stream.connection.peer.pushed.append(path)
    stream.write(_fail(error) if error else _ID.pack(b"OKAY", 0))


def start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread
