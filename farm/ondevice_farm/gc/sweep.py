"""`farm gc`: what goes under a retention policy (`plan_gc`), and taking it away (`collect_garbage`)
while the controller runs.

Planning walks the caches and reads the store without any lock. Removal then takes the gc lock
exclusive (farm/ondevice_farm/gc/leases.py), reads the live leases and then the store again, drops from the
plan whatever a lease holds or a run stored meanwhile names, deletes the runs' rows, and renames
each entry into a trash folder of the farm directory (one rename: a reader finds the whole entry
at its path or nothing there), and only after releasing the lock deletes the trash.
"""

from __future__ import annotations

import secrets
import shutil
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from ondevice_farm.config import FarmHome
from ondevice_farm.gc.caches import CACHE_LAYOUT, REGENERABLE, CacheEntry, cache_entries
from ondevice_farm.gc.leases import LeaseBook
from ondevice_farm.gc.policy import JOB_PATHS, RetentionPolicy, RunVerdict, weigh_runs
from ondevice_farm.store import ResultsStore

TRASH_DIR = ".gc-trash"
#: `ResultsStore.runs` reads this many at most: all of them
ALL_RUNS = 10**12
RUN = "run"


@dataclass(frozen=True)
class Removal:
    #: "run", or the cache the entry belongs to
    kind: str
    #: the run id, or the entry's path in the farm directory
    name: str
    #: a cache entry: measured on disk; a run: its documents' length in the store (estimated)
    size_bytes: int
    reason: str
    path: Path | None = None
    #: the entry's lease key (`artifacts/<sha256>`, ...); "" for a run
    key: str = ""


@dataclass
class GcPlan:
    removals: list[Removal]
    kept_runs: int
    #: the caches' total on disk before (measured)
    cache_bytes: int
    #: what the caches would still hold over `--max-bytes` once everything removable went
    over_max_bytes: int = 0
    #: what a live lease held when planned, and was therefore kept
    leased: int = 0

    @property
    def runs(self) -> list[Removal]:
        return [r for r in self.removals if r.kind == RUN]

    @property
    def entries(self) -> list[Removal]:
        return [r for r in self.removals if r.kind != RUN]

    def file_bytes(self) -> int:
        return sum(r.size_bytes for r in self.entries)

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (how many, their bytes), in the caches' order, runs last."""
        totals: dict[str, tuple[int, int]] = {}
        for kind in (*CACHE_LAYOUT, RUN):
            chosen = [r for r in self.removals if r.kind == kind]
            if chosen:
                totals[kind] = (len(chosen), sum(r.size_bytes for r in chosen))
        return totals


def _weigh(store: ResultsStore | None, policy: RetentionPolicy, now_s: float) -> dict[str, RunVerdict]:
    if store is None:  # no store yet: no run names anything
        return {}
    return weigh_runs(store.runs(limit=ALL_RUNS), store.job_summaries(JOB_PATHS), policy, now_s)


def _days(seconds: float) -> str:
    return f"{seconds / 86400:g} days"


def _entry_removal(entry: CacheEntry, home: FarmHome, reason: str) -> Removal:
    name = str(entry.path.relative_to(home.root))
    return Removal(entry.cache, name, entry.size_bytes, reason, entry.path, entry.key)


def plan_gc(
    home: FarmHome,
    store: ResultsStore | None,
    policy: RetentionPolicy,
    now_s: float,
    held: set[str] | None = None,
) -> GcPlan:
    """What `policy` removes at `now_s`; `held`: the leased keys (default: read them now)."""
    verdicts = _weigh(store, policy, now_s)
    held = LeaseBook(home.root).held_keys() if held is None else held
    entries = [e for cache in CACHE_LAYOUT for e in cache_entries(home, cache)]
    references = Counter(sha for v in verdicts.values() if v.kept for sha in v.artifacts)
    idle_before = now_s - policy.min_idle_s
    used_before = min(now_s - policy.keep_s, idle_before)
    removals: list[Removal] = []
    leased = 0
    for entry in entries:
        if entry.key in held:
            leased += 1
            continue
        if entry.staging:
            if entry.last_used_s < idle_before:
                removals.append(_entry_removal(entry, home, "a writer's staging folder, left behind"))
        elif entry.cache == "artifacts" and references[entry.path.name]:
            continue
        elif entry.last_used_s < used_before:
            why = "no kept run names it, " if entry.cache == "artifacts" else ""
            removals.append(_entry_removal(entry, home, f"{why}unused for {_days(policy.keep_s)}"))
    for verdict in sorted(verdicts.values(), key=lambda v: v.created_at):
        if not verdict.kept:
            reason = (
                f"older than {_days(policy.keep_s)}, not among the newest {policy.keep_runs} of its series"
            )
            removals.append(Removal(RUN, verdict.run_id, verdict.document_bytes, reason))
    plan = GcPlan(removals, sum(v.kept for v in verdicts.values()), sum(e.size_bytes for e in entries))
    plan.leased = leased
    if policy.max_bytes is not None:
        _fit(plan, home, policy.max_bytes, entries, verdicts, references, held, idle_before)
    return plan


def _fit(
    plan: GcPlan,
    home: FarmHome,
    max_bytes: int,
    entries: list[CacheEntry],
    verdicts: dict[str, RunVerdict],
    references: Counter[str],
    held: set[str],
    idle_before: float,
) -> None:
    """Remove more until the caches hold at most `max_bytes`: first entries that can be made
    again or that no kept run names, least recently used first; then runs kept only for being
    recent, oldest first, with the artifacts only they named. Never a leased entry, one used
    within the idle time, or a run kept for its series or suite."""
    going = {r.path for r in plan.entries}
    total = plan.cache_bytes - plan.file_bytes()

    def spare(entry: CacheEntry) -> bool:
        return entry.path not in going and entry.key not in held and entry.last_used_s < idle_before

    def take(entry: CacheEntry, reason: str) -> None:
        nonlocal total
        going.add(entry.path)
        total -= entry.size_bytes
        plan.removals.append(_entry_removal(entry, home, reason))

    loose = [
        e
        for e in entries
        if spare(e) and (e.cache in REGENERABLE or e.staging or not references[e.path.name])
    ]
    for entry in sorted(loose, key=lambda e: e.last_used_s):
        if total <= max_bytes:
            break
        take(entry, "over --max-bytes, least recently used")
    artifacts = {e.path.name: e for e in entries if e.cache == "artifacts" and not e.staging}
    recent = sorted((v for v in verdicts.values() if v.kept and not v.firm), key=lambda v: v.created_at)
    for verdict in recent:
        if total <= max_bytes:
            break
        verdict.reasons.clear()
        plan.kept_runs -= 1
        plan.removals.append(
            Removal(RUN, verdict.run_id, verdict.document_bytes, "over --max-bytes, oldest first")
        )
        for sha in verdict.artifacts:
            references[sha] -= 1
            named = artifacts.get(sha)
            if not references[sha] and named is not None and spare(named):
                take(named, f"over --max-bytes: only run {verdict.run_id} named it")
    plan.over_max_bytes = max(0, total - max_bytes)


@dataclass
class GcResult:
    removed: list[Removal] = field(default_factory=list)
    #: planned, then kept: a lease took it, or a run stored meanwhile names it
    spared: list[Removal] = field(default_factory=list)

    def freed_bytes(self) -> int:
        return sum(r.size_bytes for r in self.removed if r.kind != RUN)


def empty_trash(home: FarmHome) -> None:
    """What an earlier `farm gc` moved away and did not get to delete (it was stopped)."""
    shutil.rmtree(home.root / TRASH_DIR, ignore_errors=True)


def collect_garbage(
    home: FarmHome,
    store: ResultsStore | None,
    plan: GcPlan,
    policy: RetentionPolicy,
    now_s: float,
    *,
    while_locked: Callable[[], None] | None = None,
) -> GcResult:
    """Carry out `plan`, safe beside running jobs (the module's docstring says how).
    `while_locked`: called with the gc lock held, before anything moves (tests use it)."""
    empty_trash(home)
    result = GcResult()
    trash = home.root / TRASH_DIR / secrets.token_hex(4)
    # no farm directory, no files to guard: gc does not make one (a PostgreSQL store's runs still go)
    sweeping = LeaseBook(home.root).sweeping() if home.root.is_dir() else nullcontext(set[str]())
    with sweeping as held:
        if while_locked is not None:
            while_locked()
        going_runs = {r.name for r in plan.runs}
        fresh = _weigh(store, policy, now_s)
        named = {sha for v in fresh.values() if v.run_id not in going_runs for sha in v.artifacts}
        runs = [r for r in plan.runs if r.name in fresh and not fresh[r.name].firm]
        result.spared += [r for r in plan.runs if r not in runs]
        if runs and store is not None:
            store.delete_runs([r.name for r in runs])
            result.removed += runs
        for removal in plan.entries:
            sha = removal.key.removeprefix("artifacts/") if removal.kind == "artifacts" else ""
            if removal.key in held or (sha and sha in named) or removal.path is None:
                result.spared.append(removal)
                continue
            trash.mkdir(parents=True, exist_ok=True)
            try:
                removal.path.rename(trash / f"{len(result.removed)}-{removal.path.name}")
            except OSError:  # gone already, or on another filesystem: left where it is
                result.spared.append(removal)
                continue
            result.removed.append(removal)
    shutil.rmtree(trash, ignore_errors=True)
    return result
