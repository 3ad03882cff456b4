"""Numbers from `AgentSettings.extra` (the CLI fills it from `FARM_AGENT_*`), checked at one place."""

from __future__ import annotations

import math

from ondevice_farm.errors import UsageError


def extra_number(extra: dict[str, str], key: str, default: float, least: float, most: float) -> float:
    """`extra[key]` as a number in [least, most] (`default` where unset); a UsageError naming the
    environment variable otherwise."""
    text = extra.get(key, str(default))
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not least <= value <= most:  # NaN fails too
        raise UsageError(
            f"{key} must be a number from {least:g} to {most:g}, not {text!r}",
            hint=f"FARM_AGENT_{key.upper()}",
        )
    return value
