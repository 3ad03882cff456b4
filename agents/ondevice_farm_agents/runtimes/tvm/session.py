"""TVM's session module: the compiled library loaded by TVM's runtime (`tvm.runtime.load_module`)
and run by its Relax VM on the CPU. numpy and the runtime only, no farm: it is pushed to units as
one file (`ondevice_farm_agents.runtimes.spec` has the contract).

A profiled session records each kernel call the VM makes (`VirtualMachine.set_instrument`, called
before and after every call instruction; this TVM has no `vm.profile`) and `write_etdump` writes
them as JSON, one list of (kernel, nanoseconds) per inference, for the profiler (`profile.py`).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the Relax function `tvm.compile` builds from the ONNX graph
MAIN = "main"
#: the VM's own calls (allocations, shape checks, reshapes as views): not kernels
BUILTIN_PREFIX = "vm.builtin."


def default_threads() -> int:
    """TVM's thread pool takes the CPU count unless told: one thread per CPU this process may run
    on (`spec.default_threads`, copied: this file stays standalone)."""
    return len(os.sched_getaffinity(0)) or 1


class KernelClock:
    """The VM's instrument: the wall time of every kernel call, per inference. The kernels run on
    the calling thread, so the span between the VM's before and after callbacks is the kernel's."""

    def __init__(self) -> None:
        self.runs: list[list[tuple[str, int]]] = []
        self._started = 0

    def new_run(self) -> None:
        self.runs.append([])

    def __call__(self, func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
        now = time.perf_counter_ns()
        if symbol.startswith(BUILTIN_PREFIX):
            return 0
        if before:
            self._started = now
        elif self.runs:
            self.runs[-1].append((str(symbol), now - self._started))
        return 0  # VMInstrumentReturnKind.kNoOp: run the call as it is


class TvmSession:
    """TVM's Relax VM on the CPU over the library `tvm.compile` exported; the main function takes
    its inputs by position, in the model's order."""

    def __init__(
        self, artifact: Path, inputs: Sequence[np.ndarray], threads: int | None, profiled: bool = False
    ) -> None:
        # read when the runtime starts its thread pool (at the first parallel kernel): sized here
        os.environ["TVM_NUM_THREADS"] = str(threads or default_threads())
        # untyped: reached through import_module, its values are Any
        self._tvm = importlib.import_module("tvm")
        vm = importlib.import_module("tvm.runtime.vm")
        self._device = self._tvm.cpu()
        self._vm = vm.VirtualMachine(self._tvm.runtime.load_module(str(artifact)), self._device)
        self._main = self._vm[MAIN]
        self._inputs = [np.ascontiguousarray(a) for a in inputs]
        # the runtime's tensors, made once: each inference copies the NumPy inputs into them
        # (`tvm.runtime.tensor` per inference costs twice that copy in FFI calls, measured here)
        self._tensors = [self._tvm.runtime.empty(a.shape, str(a.dtype), self._device) for a in self._inputs]
        self.clock: KernelClock | None = None
        if profiled:
            self.clock = KernelClock()
            self._vm.set_instrument(self.clock)
        from importlib import metadata

        self.runner = f"apache-tvm-python {metadata.version('apache-tvm')}"

    def infer(self) -> list[np.ndarray]:
        if self.clock is not None:
            self.clock.new_run()
        for tensor, array in zip(self._tensors, self._inputs, strict=True):
            tensor.copyfrom(array)
        try:
            result = self._main(*self._tensors)
        except Exception as exc:  # TVMError: a shape or dtype the library was not built for
            text = str(exc).strip().splitlines()
            raise ValueError(f"TVM refused the inputs: {text[-1] if text else type(exc).__name__}") from None
        outputs = list(result) if not hasattr(result, "numpy") else [result]
        # `numpy()` copies out of the runtime's tensor into an array of its own: NumPy out, copied
        return [t.numpy() for t in outputs]

    def write_etdump(self, path: Path) -> None:
        """The recorded kernel calls, one list per inference, as JSON."""
        runs = self.clock.runs if self.clock is not None else []
        path.write_text(json.dumps({"runner": self.runner, "runs": runs}), encoding="utf-8")


def open_session(
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    etdump: bool = False,
    names: tuple[list[str], list[str]] | None = None,
) -> TvmSession:
    """The VM of a `tvm/<backend>` library (`cpu`: the only backend; the library holds its
    kernels). The main function takes its inputs by position, so `names` is not needed; `etdump`
    turns the per-kernel clock on."""
    return TvmSession(artifact, inputs, threads, profiled=etdump)
