"""An ADB peer for tests: a loopback server that speaks the device side of the ADB protocol.

It authenticates hosts with real RSA signatures, serves `shell:`/`exec:` and `sync:` streams,
runs commands in a sandbox directory that stands in for the device's filesystem, answers
`getprop` from a configurable identity, can serve a scripted battery (`BatteryScript`), and can
be told to fail (see `Fault`).
"""

from .battery import BatteryScript
from .faults import Fault
from .sandbox import Identity
from .server import AdbPeer

__all__ = ["AdbPeer", "BatteryScript", "Fault", "Identity"]
