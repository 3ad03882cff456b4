"""Durations as people write them on a command line or in a suite: `90s`, `10m`, `1h`, `1.5m`."""

from __future__ import annotations

import re

from ondevice_farm.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
SECONDS_PER_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(text: str | float | int, where: str = "--sustained") -> float:
    """Seconds in `text`; a bare number is seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text))
        if match is None:
            raise UsageError(f"{where}: {text!r} is not a duration (e.g. 90s, 10m, 1h)")
        seconds = float(match.group(1)) * SECONDS_PER_UNIT[match.group(2) or "s"]
    if seconds <= 0:
        raise UsageError(f"{where}: a duration must be positive")
    return seconds
