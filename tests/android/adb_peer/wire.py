"""The ADB wire format as a device speaks it: 24-byte headers, payloads, RSA token auth.

Written from the protocol description in AOSP's `packages/modules/adb/protocol.txt`:
every message is six little-endian uint32 (command, arg0, arg1, length, checksum, magic)
followed by `length` bytes of payload. Hosts older than version 0x01000001 checksum each
payload (the byte sum); newer ones send 0 and expect no check.
"""

from __future__ import annotations

import base64
import socket
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

HEADER = struct.Struct("<6I")
VERSION_CHECKSUMS = 0x01000000
VERSION_SKIP_CHECKSUM = 0x01000001
DEVICE_MAX_PAYLOAD = 256 * 1024

AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3
TOKEN_SIZE = 20

#: the Android public key blob: modulus words, n0inv, modulus LE, rr LE, exponent
_ANDROID_PUBKEY = struct.Struct("<II256s256sI")


def command_word(name: bytes) -> int:
    return int(struct.unpack("<I", name)[0])


CNXN, AUTH, OPEN, OKAY, WRTE, CLSE = (
    command_word(c) for c in (b"CNXN", b"AUTH", b"OPEN", b"OKAY", b"WRTE", b"CLSE")
)
KNOWN = {CNXN, AUTH, OPEN, OKAY, WRTE, CLSE}


class ProtocolError(Exception):
    """The host sent something a device would reject; the connection is dropped."""


@dataclass(frozen=True)
class Packet:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return struct.pack("<I", self.command).decode("ascii", "replace")


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFFFFFF


def encode(packet: Packet, corrupt: bool = False) -> bytes:
    data = packet.data
    header = HEADER.pack(
        packet.command, packet.arg0, packet.arg1, len(data), checksum(data), packet.command ^ 0xFFFFFFFF
    )
    if corrupt and data:
        # Flip one payload byte after the checksum was computed: what a bad cable does.
        data = bytes([data[0] ^ 0xFF]) + data[1:]
    return header + data


def read_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionResetError("host closed the connection")
        buf += chunk
    return bytes(buf)


def read_packet(sock: socket.socket, verify_checksum: bool) -> Packet:
    command, arg0, arg1, length, check, magic = HEADER.unpack(read_exact(sock, HEADER.size))
    if command not in KNOWN or magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad header: command {command:#x} magic {magic:#x}")
    if length > 1024 * 1024:
        raise ProtocolError(f"payload of {length} bytes is over the limit")
    data = read_exact(sock, length) if length else b""
    if verify_checksum and checksum(data) != check:
        raise ProtocolError("payload checksum mismatch")
    return Packet(command, arg0, arg1, data)


def decode_public_key(text: bytes) -> rsa.RSAPublicKey:
    """An `adbkey.pub` line (base64 blob, then ` user@host`) -> the RSA key it holds."""
    blob = base64.b64decode(text.strip(b"\0").split(b" ", 1)[0])
    words, _n0inv, modulus, _rr, exponent = _ANDROID_PUBKEY.unpack(blob)
    if words != 64:
        raise ProtocolError(f"unsupported key size: {words * 32} bits")
    return rsa.RSAPublicNumbers(exponent, int.from_bytes(modulus, "little")).public_key()


def signature_valid(key: rsa.RSAPublicKey, token: bytes, signature: bytes) -> bool:
    """adbd's check: the token is taken as a SHA-1 digest, signed with PKCS#1 v1.5."""
    try:
        key.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
    except (InvalidSignature, ValueError):
        return False
    return True
