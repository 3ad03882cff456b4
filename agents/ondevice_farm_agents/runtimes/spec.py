"""What the agents need of a runtime whose artifact runs in a Python session: the value type of the
agent side's runtime registry (`ondevice_farm_agents.runtimes`) and the contract of its session
module.

A session module is one standalone `.py` file, numpy and the runtime only (no farm import), since
it is pushed to a unit as it is and loaded there by path (`android/edge_runner.py`). It defines

    open_session(backend, artifact, inputs, threads, etdump, names) -> session

`backend`: the target's second half; `artifact`: the program's path; `inputs`: NumPy arrays in the
model's order; `threads`: the thread pool's size, None for one per CPU the process may run on;
`etdump`: load with the runtime's per-op profiling on (only for a runtime that profiles); `names`:
the artifact's own (input names, output names) in the model's order where the compile recorded
them. The session has `runner` (the runtime and its version, for `DeviceRun.runner`) and `infer()`:
one inference as an application makes it, NumPy in and NumPy out (copied), so a sample times the
same span on every runtime. A profiled session also has `write_etdump(path)`: the dump its
runtime's profiler reads.

This module imports no runtime and no numpy at run time: the repeat script imports it after it pins
its CPUs and before the runtime starts a thread.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    import numpy as np

    from ondevice_farm_agents.base import DeviceRun, RunRequest


class EdgeSession(Protocol):
    """One loaded model with its inputs bound."""

    runner: str

    def infer(self) -> list[np.ndarray]:
        """One inference: the outputs, in the model's order."""
        ...


class ProfiledSession(EdgeSession, Protocol):
    """A session loaded with per-op profiling on: its runs are recorded, and the dump written."""

    def write_etdump(self, path: Path) -> None: ...


#: (request, run, a profiled session's loader) -> None: fills `run.ops`, `run.placement` and a note
Profiler: TypeAlias = "Callable[[RunRequest, DeviceRun, Callable[[], ProfiledSession]], None]"


@dataclass(frozen=True)
class SessionRuntime:
    """A runtime as the agents see it: where its session module is, what it imports, how it
    installs, and how it profiles per op if it can. Pure data: its code is imported only when a
    job of the runtime runs."""

    name: str
    #: the name people use, in messages
    title: str
    #: the runtime's session module (see the module docstring)
    session_module: Path
    #: modules imported before any clock starts (the runtime's import is no model's load), in order
    imported_first: tuple[str, ...]
    #: the import package a host without the runtime lacks, named in its message
    package: str
    #: the install extra (`pip install 'ondevice-farm[EXTRA]'`) that brings it to a host
    extra: str
    #: what `pip install` takes for a unit's own python3
    pip_name: str
    #: the native runner an Android build of the runtime would use (docs/android.md's recipe)
    android_runner: str
    #: `module:function` of its `Profiler`; None where the runtime has no per-op profiler
    profiler: str | None = None
    #: the job's note where a per-op profile was asked for and the runtime has no profiler
    no_profile_note: str = ""

    @property
    def profiles_ops(self) -> bool:
        return self.profiler is not None

    def load_profiler(self) -> Profiler:
        """The profiler, its module imported now (entry points' `module:function` syntax)."""
        if self.profiler is None:
            raise ValueError(f"{self.name} has no per-op profiler")
        module, _, name = self.profiler.partition(":")
        profiler: Profiler = getattr(importlib.import_module(module), name)
        return profiler


def default_threads() -> int:
    """What a session's thread pool starts with unless told: one thread per CPU this process may
    run on, as every session module sizes it (each holds a copy: it must stay standalone)."""
    return len(os.sched_getaffinity(0)) or 1


@functools.cache
def load_session_module(path: Path) -> ModuleType:
    """A session module loaded from its file, as the unit's runner loads its pushed copy; once per
    process, so a job's sessions share one module."""
    spec = importlib.util.spec_from_file_location(f"farm_session_{path.parent.name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the session module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _opened(
    runtime: SessionRuntime,
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    names: tuple[list[str], list[str]] | None,
    profiled: bool,
) -> Any:
    module = load_session_module(runtime.session_module)
    return module.open_session(backend, artifact, inputs, threads, profiled, names)


def open_session(
    runtime: SessionRuntime,
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    names: tuple[list[str], list[str]] | None = None,
) -> EdgeSession:
    """The runtime's session for a target `runtime/backend`, in this process."""
    session: EdgeSession = _opened(runtime, backend, artifact, inputs, threads, names, False)
    return session


def open_profiled_session(
    runtime: SessionRuntime,
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    names: tuple[list[str], list[str]] | None = None,
) -> ProfiledSession:
    """`open_session` with per-op profiling on; only for a runtime that `profiles_ops`."""
    session: ProfiledSession = _opened(runtime, backend, artifact, inputs, threads, names, True)
    return session
