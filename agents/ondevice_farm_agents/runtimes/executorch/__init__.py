"""ExecuTorch on the agents: a `.pte` program run in a Python session (`session.py`, pushed to
units as it is), its per-op profile from the runtime's ETDump (`profile.py`). This `__init__` is
pure data: the registry imports it, and the runtime is imported only when a job runs."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm_agents.runtimes.spec import SessionRuntime

RUNTIME = SessionRuntime(
    name="executorch",
    title="ExecuTorch",
    session_module=Path(__file__).resolve().with_name("session.py"),
    # ExecuTorch's tensors are torch's; the pybindings hold the XNNPACK thread pool the session sizes
    imported_first=("torch", "executorch.runtime", "executorch.extension.pybindings.portable_lib"),
    package="executorch",
    extra="executorch",
    pip_name="executorch",
    android_runner="executor_runner",
    profiler="ondevice_farm_agents.runtimes.executorch.profile:profile_etdump",
)
