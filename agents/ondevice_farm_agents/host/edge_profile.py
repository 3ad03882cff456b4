"""A session runtime's per-op profile, on the host and for a unit alike: the runtime's own profiler
(the registry's `profiler`, imported only now) reads a profiled session; a runtime without one says
so in the job's notes, so an empty op table is never mistaken for a model without ops."""

from __future__ import annotations

from collections.abc import Callable

from ondevice_farm_agents.base import DeviceRun, RunRequest
from ondevice_farm_agents.runtimes.spec import ProfiledSession, SessionRuntime


def profile_ops(
    runtime: SessionRuntime,
    request: RunRequest,
    run: DeviceRun,
    load_profiled: Callable[[], ProfiledSession],
) -> None:
    """Fill `run.ops` and `run.placement` with the runtime's per-op profile, or note its absence;
    `load_profiled` is called only for a runtime that profiles."""
    if not runtime.profiles_ops:
        run.notes.append(
            runtime.no_profile_note or f"per-op profile: none; {runtime.title} has no op profiler"
        )
        return
    runtime.load_profiler()(request, run, load_profiled)
