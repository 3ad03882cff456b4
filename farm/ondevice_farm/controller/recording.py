"""A run in the store: started, each job written whole when it is complete, finished or interrupted.

The recorder keeps counts, not jobs: a job's document is written by the fleet as the job finishes
(`ondevice_farm.controller.job_writer`), and a night of 300,000 jobs costs the submitter two ints.

The run document names its controller (host and pid). A controller that starts marks the runs
that a dead controller on its host left "running" as "interrupted": their complete jobs stay,
and nothing reads as still in progress.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ondevice_farm.controller.job_summary import JobSummary, RunCounts
from ondevice_farm.controller.results import RunStore, controller_identity
from ondevice_farm.store import ResultsStore


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def interrupt_orphans(store: ResultsStore) -> list[str]:
    """Mark this host's runs whose controller process is gone; returns their ids."""
    here = socket.gethostname()
    marked = []
    for run in store.running_runs():
        owner = run.document.get("controller") or {}
        orphaned = (
            owner.get("host") == here and isinstance(owner.get("pid"), int) and not _alive(owner["pid"])
        )
        if orphaned and store.mark_interrupted(run.run_id):
            marked.append(run.run_id)
    return marked


class RunRecorder:
    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.counts = RunCounts()
        self.status = "running"
        #: the run's jobs are the controller's: it finishes the run, whether or not this follows
        #: it to its end (controller/fleet_runs.py)
        self.handed_over = False
        #: handed over and not followed at all (`farm nightly --detach`): the run stays "running"
        self.detached = False

    def add_job(self, job: dict[str, Any]) -> JobSummary:
        """Write a job this submitter made itself (one that failed before reaching a unit)."""
        self.store.add_job(self.run_id, job)
        return self.stored(JobSummary.of(job))

    def stored(self, summary: JobSummary) -> JobSummary:
        """Count a job the fleet wrote."""
        self.counts.add(summary.status)
        return summary


@contextmanager
def recorded_run(
    store: RunStore, run_id: str, kind: str, document: dict[str, Any], suite: str | None = None
) -> Iterator[RunRecorder]:
    """Start the run; finish it with its status, or mark it interrupted if the body raised.
    A run handed over to the controller is the controller's to finish or to mark: left as it is."""
    if isinstance(store, ResultsStore):  # the controller's store: `farm serve` does this at its start
        interrupt_orphans(store)
    store.start_run(run_id, kind, {**document, "controller": controller_identity()}, suite=suite)
    recorder = RunRecorder(store, run_id)
    try:
        yield recorder
    except BaseException:
        if not recorder.handed_over:
            store.mark_interrupted(run_id)
            recorder.status = "interrupted"
        raise
    if recorder.detached:
        return
    recorder.status = recorder.counts.status()
    store.finish_run(run_id, recorder.status)
