"""Numbers JSON can hold: numpy scalars as Python numbers, non-finite floats as null. Below the
CLI and the submit API, which both write JSON documents."""

from __future__ import annotations

import math
from typing import Any


def json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
