"""Following a run the controller is running, from the store: `farm show RUN --follow` and
`farm nightly --follow RUN` read the run's state until it is no longer `running`.

The store is the one place that knows a night's progress whatever submitter started it (the
fleet writes each job as it ends, controller/job_writer.py), so a follower needs no connection
to the submission: it reads the run row and its job counts, a few small queries a poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ondevice_farm.store import RunRow

#: how often the run's state is read from the store while it runs
DEFAULT_FOLLOW_EVERY_S = 2.0
#: a progress line at most this often, while the count of stored jobs grows
DEFAULT_REPORT_EVERY_S = 60.0


class FollowedStore(Protocol):
    def run(self, run_id: str) -> RunRow: ...
    def job_counts(self, run_id: str) -> dict[str, int]: ...


def progress_line(row: RunRow, counts: dict[str, int]) -> str:
    """`run R: 1,234 of 3,000 jobs stored (1,230 ok, 4 failed)`: the planned count is the run
    document's (`planned_jobs`, written before its first job starts)."""
    stored = sum(counts.values())
    planned = row.document.get("planned_jobs")
    of = f" of {planned:,}" if isinstance(planned, int) else ""
    kinds = ", ".join(f"{n:,} {status}" for status, n in sorted(counts.items()) if n)
    return f"run {row.run_id}: {stored:,}{of} jobs stored" + (f" ({kinds})" if kinds else "")


def wait_for_end(
    store: FollowedStore,
    row: RunRow,
    say: Callable[[str], None],
    every_s: float = DEFAULT_FOLLOW_EVERY_S,
    report_every_s: float = DEFAULT_REPORT_EVERY_S,
    sleep: Callable[[float], None] = time.sleep,
) -> RunRow:
    """The run's row once it has ended, saying its progress (at most every `report_every_s`, and
    only when more jobs were stored) while it runs. Ctrl-C raises out of here: the follower
    stops following, the run is the controller's and goes on."""
    said_at, said = -report_every_s, -1
    while row.status == "running":
        counts = store.job_counts(row.run_id)
        stored = sum(counts.values())
        if stored != said and time.monotonic() - said_at >= report_every_s:
            say(progress_line(row, counts) + "; following it to its end")
            said_at, said = time.monotonic(), stored
        sleep(every_s)
        row = store.run(row.run_id)
    return row


def stopped_following(run_id: str) -> str:
    return (
        f"stopped following run {run_id}: it goes on in the controller (`farm cancel {run_id}` stops it; "
        f"`farm show {run_id} --follow` follows it again)"
    )
