"""The fleet's results store: the one a fleet writes finished jobs to and serves its submitters'
store calls from (`ondevice_farm.controller.results`). `farm serve` names it at start; an embedded
fleet is handed its submitter's own (`use`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ondevice_farm.controller.results import ControllerResults
from ondevice_farm.errors import FarmError, SchedulingError

log = logging.getLogger(__name__)


def open_results(location: str) -> ControllerResults:
    from pathlib import Path

    from ondevice_farm.store_sql import is_postgres_url

    return ControllerResults(location if is_postgres_url(location) else Path(location))


class FleetStore:
    """The store, or none yet; calls run on the loop's executor, never on the loop itself."""

    def __init__(self, location: str | None = None) -> None:
        self.results: ControllerResults | None = None if location is None else open_results(location)

    def use(self, location: str) -> list[str]:
        """Like a starting `farm serve`, marks the runs dead controllers of this host left
        running; returns their ids."""
        from ondevice_farm.controller.recording import interrupt_orphans

        if self.results is None or str(self.results.location) != location:
            if self.results is not None:
                self.results.close()
            self.results = open_results(location)
        return self.results.locked(interrupt_orphans)

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.results is None:
            raise SchedulingError(
                "this controller keeps no results store", hint="submit without --address, or use `farm serve`"
            )
        results = self.results
        return await asyncio.get_running_loop().run_in_executor(None, results.call, method, args, kwargs)

    async def mark_interrupted(self, run_id: str | None) -> None:
        """A submitter that vanished cannot finish its run: the store says it was interrupted."""
        if run_id is not None and self.results is not None:
            try:
                await self.call("mark_interrupted", (run_id,), {})
            except FarmError as exc:
                log.warning("cannot mark run %s interrupted: %s", run_id, exc)

    async def finish_run(self, run_id: str) -> None:
        """The controller's own run ended: its status from its stored jobs' (the submitter's early
        failures among them), as a following submitter would have written it."""
        from ondevice_farm.controller.job_summary import RunCounts

        try:
            counts: dict[str, int] = await self.call("job_counts", (run_id,), {})
            ok = counts.get("ok", 0)
            status = RunCounts(ok=ok, failed=sum(counts.values()) - ok).status()
            await self.call("finish_run", (run_id, status), {})
        except FarmError as exc:
            log.warning("cannot finish run %s: %s", run_id, exc)
            return
        log.info("run %s finished: %s", run_id, status)
