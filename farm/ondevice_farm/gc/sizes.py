"""Byte counts as people write them (`--max-bytes 50G`) and read them (`1.2 GB`)."""

from __future__ import annotations

import re

from ondevice_farm.errors import UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
#: decimal units, as `df -H` and disk vendors count; `Gi` etc. are the binary ones
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_bytes(text: str, where: str = "--max-bytes") -> int:
    """`500M`, `50G`, `1.5T` (powers of 1000), `50Gi` (of 1024), or a plain number of bytes."""
    match = _SIZE.match(text)
    if match is None:
        raise UsageError(f"{where}: {text!r} is not a size (e.g. 500M, 50G, 1.5T, 50Gi or bytes)")
    number, unit, suffix = match.groups()
    base = 1024 if suffix.lower().startswith("i") else 1000
    return int(float(number) * base ** _POWERS[unit.lower()])


def format_bytes(count: int | float) -> str:
    """`1.2 GB`: decimal units, three significant figures."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} TB"
