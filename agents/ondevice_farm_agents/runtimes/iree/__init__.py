"""IREE on the agents: a `.vmfb` module run by `iree.runtime` in a Python session (`session.py`,
pushed to units as it is), its per-dispatch profile from IREE's own HAL profiling (`profile.py`:
IREE's Python bindings do not expose it, its benchmark runner does). This `__init__` is pure data:
the registry imports it, and the runtime is imported only when a job runs."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm_agents.runtimes.spec import SessionRuntime

RUNTIME = SessionRuntime(
    name="iree",
    title="IREE",
    session_module=Path(__file__).resolve().with_name("session.py"),
    imported_first=("iree.runtime",),
    package="iree.runtime",
    extra="iree",
    pip_name="iree-base-runtime",
    android_runner="iree-benchmark-module",
    profiler="ondevice_farm_agents.runtimes.iree.profile:profile_dispatches",
)
