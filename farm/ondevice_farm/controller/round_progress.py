"""How a paired job's rounds are going, told to its submitter while they run.

A compare on a noisy unit may run its rounds for minutes; without word the submitter sees
nothing between "N pair(s)" and the verdict. The DeviceActor reports through the fleet (a
`progress` JobEvent) after the first round and then at most every `every_s`, so a compare of
hundreds of rounds prints a line every few seconds, not one per round. A generation job's line
names each metric's ratio (agents/ondevice_farm_agents/paired.py, `GENERATION_PROGRESS_NAMES`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence

from ondevice_farm.analysis.paired import log_ratios

#: the least time between two progress lines of one job
DEFAULT_PROGRESS_EVERY_S = 10.0


class RoundReporter:
    def __init__(
        self,
        send: Callable[[str], object],
        every_s: float = DEFAULT_PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._every_s = every_s
        self._clock = clock
        self._last: float | None = None

    def __call__(
        self,
        pairs: Sequence[tuple[float, float]],
        metrics: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    ) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self._every_s:
            return
        self._last = now
        if not pairs:
            return
        named = metrics or {"B/A": pairs}
        ratios = ", ".join(f"{name} {_geometric_mean_ratio(p):.3f}" for name, p in named.items())
        means = "geometric mean" if len(named) == 1 else "geometric means"
        # progress must never cost a job its result: a fleet that cannot take it is ignored
        with contextlib.suppress(Exception):
            self._send(f"round {len(pairs)}, {ratios} so far ({means} of the rounds)")


def _geometric_mean_ratio(pairs: Sequence[tuple[float, float]]) -> float:
    """B/A over the rounds of time-like (A, B) pairs: exp of the mean log ratio."""
    logs = log_ratios(pairs)
    return math.exp(sum(logs) / len(logs))
