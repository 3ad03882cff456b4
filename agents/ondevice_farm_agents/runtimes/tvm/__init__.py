"""TVM on the agents: the library `tvm.compile` exported (`model.so`) run by TVM's Relax VM in a
Python session (`session.py`, pushed to units as it is), its per-kernel profile from the VM's
instrument (`profile.py`). This `__init__` is pure data: the registry imports it, and the runtime
is imported only when a job runs."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm_agents.runtimes.spec import SessionRuntime

RUNTIME = SessionRuntime(
    name="tvm",
    title="TVM",
    session_module=Path(__file__).resolve().with_name("session.py"),
    # tvm_ffi imports torch where it is installed (its DLPack exchange): all before any clock
    imported_first=("tvm", "tvm.runtime.vm"),
    package="tvm",
    extra="tvm",
    pip_name="apache-tvm",
    # a C++ driver on TVM's runtime and tvm-ffi libraries (the aarch64 wheel carries both)
    android_runner="native driver on libtvm_runtime.so",
    profiler="ondevice_farm_agents.runtimes.tvm.profile:profile_kernels",
)
