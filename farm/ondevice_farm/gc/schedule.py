"""One garbage collection of a farm directory (`collect_once`), and `farm serve`'s schedule of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from ondevice_farm.config import FarmHome
from ondevice_farm.errors import FarmError
from ondevice_farm.gc.policy import RetentionPolicy
from ondevice_farm.gc.sizes import format_bytes
from ondevice_farm.gc.sweep import GcPlan, GcResult, collect_garbage, plan_gc
from ondevice_farm.store import ResultsStore, StoreLocation, store_exists

#: how often `farm serve` collects (0: never; `farm serve --gc-every 24h` turns it on)
DEFAULT_GC_INTERVAL_S = 0.0


@dataclass
class GcOutcome:
    plan: GcPlan
    #: None for a dry run
    result: GcResult | None


def collect_once(
    home: FarmHome,
    store_location: StoreLocation,
    policy: RetentionPolicy,
    *,
    dry_run: bool = False,
    now_s: float | None = None,
) -> GcOutcome:
    """Plan under `policy` (and carry it out unless `dry_run`) at `now_s` (default: now)."""
    now_s = time.time() if now_s is None else now_s
    # a store not made yet is no store to read (and `farm gc` does not make one)
    with ResultsStore(store_location) if store_exists(store_location) else nullcontext() as store:
        plan = plan_gc(home, store, policy, now_s)
        if dry_run:
            return GcOutcome(plan, None)
        return GcOutcome(plan, collect_garbage(home, store, plan, policy, now_s))


def summary_line(outcome: GcOutcome) -> str:
    """One line: what went (or would go), measured on disk, and the runs' estimated documents."""
    plan, result = outcome.plan, outcome.result
    removals = plan.removals if result is None else result.removed
    files = [r for r in removals if r.kind != "run"]
    runs = [r for r in removals if r.kind == "run"]
    verb = "would remove" if result is None else "removed"
    line = (
        f"{verb} {len(runs)} run(s) and {len(files)} cache entr{'y' if len(files) == 1 else 'ies'}: "
        f"{format_bytes(sum(r.size_bytes for r in files))} on disk (measured), "
        f"{format_bytes(sum(r.size_bytes for r in runs))} of run documents in the store (estimated)"
    )
    if result is not None and result.spared:
        line += f"; {len(result.spared)} planned removal(s) kept: in use or named by a new run"
    if plan.over_max_bytes:
        line += (
            f"; still {format_bytes(plan.over_max_bytes)} over --max-bytes: what is left is kept by the "
            "policy (series, suites), held by running jobs, or used within the last hour"
        )
    return line


class GcSchedule:
    """`farm serve`'s collector: `collect_once` every `interval_s` on a thread of its own, each
    outcome (or error) told to `log` in one line."""

    def __init__(
        self,
        home: FarmHome,
        store_location: StoreLocation,
        policy: RetentionPolicy,
        interval_s: float,
        log: Callable[[str], None],
    ) -> None:
        self.home, self.store_location, self.policy = home, store_location, policy
        self.interval_s = interval_s
        self.log = log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="farm-gc", daemon=True)

    def start(self) -> GcSchedule:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                outcome = collect_once(self.home, self.store_location, self.policy)
            except (FarmError, OSError) as exc:  # a full disk or a busy store: try again next time
                self.log(f"gc failed: {exc}")
                continue
            self.log(f"gc: {summary_line(outcome)}")
