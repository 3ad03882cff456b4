"""The agent side's runtimes whose artifact runs in a Python session, one folder each, listed in
one table: the agents ask it, never a name (pluggy's hook spec, ONNX Runtime's execution providers).

A runtime's folder holds a light `__init__` with its `RUNTIME` (a `SessionRuntime`, pure data: this
module imports nothing else of it), its standalone session module and, where it profiles per op,
its profiler, named by `module:function` and imported only when a profile is asked for. `spec.py`
has the contract. The controller side has a registry of its own (`ondevice_farm.runtimes`).
"""

from __future__ import annotations

from ondevice_farm_agents.runtimes import executorch, iree, litert, tvm
from ondevice_farm_agents.runtimes.spec import SessionRuntime

SESSION_RUNTIMES: dict[str, SessionRuntime] = {
    runtime.name: runtime for runtime in (executorch.RUNTIME, litert.RUNTIME, tvm.RUNTIME, iree.RUNTIME)
}


def session_runtime(name: str) -> SessionRuntime | None:
    """The runtime a target's first half names, where its artifact runs in a Python session."""
    return SESSION_RUNTIMES.get(name)


__all__ = ["SESSION_RUNTIMES", "SessionRuntime", "session_runtime"]
