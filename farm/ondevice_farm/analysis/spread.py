"""When a latency figure's spread says not to trust it as it stands: thresholds and advice.

Apart from `sessions.py` (which computes the spread) so the terminal report reads them without numpy.
"""

from __future__ import annotations

from typing import Any

#: within one session, samples whose robust spread exceeds this are noisy (10% of the median)
NOISY_WITHIN_SESSION = 0.10
#: sessions whose p50s spread more than this (log sd, about 5%) disagree
NOISY_BETWEEN_SESSIONS = 0.05


def spread_warnings(latency: dict[str, Any]) -> list[str]:
    """Advice where the spread says the figure is not to be trusted as it stands."""
    warnings: list[str] = []
    spread = latency.get("spread") or {}
    within = spread.get("within_session", latency.get("mad_over_median"))
    if within is not None and within > NOISY_WITHIN_SESSION:
        warnings.append(
            f"samples within a session vary (MAD/median {within:.2f}): something else ran on the device "
            "or it throttled; stop other load, set --threads below the core count, or raise --warmup"
        )
    between = spread.get("between_session")
    if between is not None and between > NOISY_BETWEEN_SESSIONS:
        warnings.append(
            f"sessions disagree (p50 {spread['session_p50_min']:.3f}-{spread['session_p50_max']:.3f} ms over "
            f"{spread['sessions']} sessions): the device's state differs per session (thread placement, "
            "clocks); compare runs with the same --repeats (5 or more), and pin --threads"
        )
    return warnings
