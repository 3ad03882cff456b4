"""ExecuTorch's session module: `executorch.runtime`'s program, its `forward` method, the XNNPACK
delegate if the program holds one (an `executorch/*` program holds its delegate already, so the
backend chooses nothing here). numpy and the runtime only, no farm: it is pushed to units as one
file (`ondevice_farm_agents.runtimes.spec` has the contract).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: ExecuTorch's method name of a single-entry program (torch.export's `forward`)
FORWARD = "forward"


def default_threads() -> int:
    """XNNPACK's pthreadpool takes the CPU count unless told: one thread per CPU this process may
    run on (`spec.default_threads`, copied: this file stays standalone)."""
    return len(os.sched_getaffinity(0)) or 1


class ExecuTorchSession:
    """`executorch.runtime`: the program, its `forward` method, the XNNPACK delegate if it holds one."""

    def __init__(
        self,
        artifact: Path,
        inputs: Sequence[np.ndarray],
        threads: int | None,
        etdump: bool = False,
    ) -> None:
        import torch

        # untyped libraries: reached through import_module, their values are Any
        portable_lib = importlib.import_module("executorch.extension.pybindings.portable_lib")
        runtime = importlib.import_module("executorch.runtime")
        # XNNPACK's thread pool is one per process, made on first use: sized before the load
        portable_lib._unsafe_reset_threadpool(threads or default_threads())
        self._program = runtime.Runtime.get().load_program(
            artifact, enable_etdump=etdump, debug_buffer_size=0
        )
        method = self._program.load_method(FORWARD)
        if method is None:
            raise RuntimeError(f"the program has no {FORWARD!r} method")
        self._method = method
        self._inputs = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
        from importlib import metadata

        self.runner = f"executorch-python {metadata.version('executorch')}"

    def infer(self) -> list[np.ndarray]:
        return [np.array(t.numpy(), copy=True) for t in self._method.execute(self._inputs)]

    def write_etdump(self, path: Path) -> None:
        self._program.write_etdump_result_to_file(str(path), str(path.with_suffix(".debug")))


def open_session(
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    etdump: bool = False,
    names: tuple[list[str], list[str]] | None = None,
) -> ExecuTorchSession:
    """The session of an `executorch/<backend>` program (its delegate is in it already; the
    program's own method takes its inputs by position, so `names` is not needed)."""
    return ExecuTorchSession(artifact, inputs, threads, etdump)
