"""Faults the peer can be told to cause, each once: a dropped link, a stall, a corrupted packet."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

Action = Literal["drop", "stall", "corrupt"]
Trigger = Literal["shell", "push"]


@dataclass
class Fault:
    """`action` when a `trigger` whose command (shell) or device path (push) contains `match`
    has moved `after_bytes` bytes (output sent, or file data received) and `delay_s` has passed."""

    action: Action
    trigger: Trigger
    match: str = ""
    after_bytes: int = 0
    delay_s: float = 0.0
    fired: threading.Event = field(default_factory=threading.Event)

    def matches(self, trigger: Trigger, subject: str) -> bool:
        return not self.fired.is_set() and trigger == self.trigger and self.match in subject
