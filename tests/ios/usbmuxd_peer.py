"""A usbmuxd on loopback that speaks the plist protocol (version 1), for the real UsbmuxProvider.

It lists the phones it is given and refuses every Connect, as usbmuxd does for a phone
unplugged between the listing and the connection; it records each request it saw.
"""

from __future__ import annotations

import plistlib
import socket
import struct
import threading
from typing import Any

_HEADER = struct.Struct("<IIII")  # length (with itself), version, message, tag
_PLIST_VERSION = 1
_PLIST_MESSAGE = 8
_CONNREFUSED = 3


class UsbmuxdPeer:
    def __init__(self, devices: list[tuple[int, str, str]]) -> None:
        """`devices`: (DeviceID, SerialNumber, ConnectionType) of each attached phone."""
        self.devices = devices
        self.requests: list[dict[str, Any]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="usbmuxd-peer", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.getsockname()[1]}"

    def __enter__(self) -> UsbmuxdPeer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join(timeout=5.0)
        self._server.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    self._converse(conn)
                except (OSError, ConnectionError):
                    continue

    def _converse(self, conn: socket.socket) -> None:
        while True:
            head = _recv_exactly(conn, _HEADER.size)
            if head is None:
                return
            length, _version, _message, tag = _HEADER.unpack(head)
            request = plistlib.loads(_recv_exactly(conn, length - _HEADER.size) or b"")
            self.requests.append(request)
            payload = plistlib.dumps(self._answer(request))
            conn.sendall(
                _HEADER.pack(_HEADER.size + len(payload), _PLIST_VERSION, _PLIST_MESSAGE, tag) + payload
            )

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request.get("MessageType")
        if kind == "ReadBUID":
            return {"BUID": "2E5E5E5E-0000-4000-8000-00000000F00D"}
        if kind == "ListDevices":
            return {
                "DeviceList": [
                    {
                        "MessageType": "Attached",
                        "DeviceID": device_id,
                        "Properties": {
                            "DeviceID": device_id,
                            "SerialNumber": serial,
                            "ConnectionType": kind_,
                        },
                    }
                    for device_id, serial, kind_ in self.devices
                ]
            }
        return {"MessageType": "Result", "Number": _CONNREFUSED}


def _recv_exactly(conn: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
