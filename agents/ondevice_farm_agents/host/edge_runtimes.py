"""ExecuTorch and LiteRT sessions on the host, behind one small interface.

A session is loaded from its artifact (`.pte`, `.tflite`) with its inputs bound in the model's
order, and `infer()` is one inference as an application makes it: NumPy inputs in, NumPy outputs
out (copied, as ONNX Runtime's `session.run` returns them), so a sample times the same span on
every runtime. This module imports numpy and the runtime only (no farm), for the repeat script
(`edge_session.py`) as much as for the job in the agent's process.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

#: ExecuTorch's method name of a single-entry program (torch.export's `forward`)
FORWARD = "forward"


class EdgeSession(Protocol):
    """One loaded model with its inputs bound."""

    runner: str

    def infer(self) -> list[np.ndarray]:
        """One inference: the outputs, in the model's order."""
        ...


def default_threads() -> int:
    """What both runtimes' thread pools start with unless told: one thread per CPU this process
    may run on (XNNPACK's pthreadpool and LiteRT's interpreter alike take the CPU count)."""
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


class LiteRtSession:
    """`ai_edge_litert`'s interpreter; `delegate` False: builtin kernels only (no XNNPACK).
    `names`: the signature's (input names, output names) in the model's order, as the compile
    recorded them; None: the signature's own order."""

    def __init__(
        self,
        artifact: Path,
        inputs: Sequence[np.ndarray],
        threads: int | None,
        delegate: bool,
        names: tuple[list[str], list[str]] | None = None,
    ) -> None:
        litert = importlib.import_module("ai_edge_litert.interpreter")

        resolver = (
            litert.OpResolverType.AUTO
            if delegate
            else litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        self._interpreter = litert.Interpreter(
            model_path=str(artifact),
            num_threads=threads or default_threads(),
            experimental_op_resolver_type=resolver,
        )
        self._runner = self._interpreter.get_signature_runner()
        input_names, self._outputs = names or (
            list(self._runner.get_input_details()),
            list(self._runner.get_output_details()),
        )
        if len(input_names) != len(inputs):
            raise RuntimeError(f"the model takes {len(input_names)} inputs, the job gives {len(inputs)}")
        self._inputs = {name: np.ascontiguousarray(a) for name, a in zip(input_names, inputs, strict=True)}
        from importlib import metadata

        self.runner = f"ai-edge-litert-python {metadata.version('ai-edge-litert')}"

    def infer(self) -> list[np.ndarray]:
        result = self._runner(**self._inputs)
        return [np.array(result[name], copy=True) for name in self._outputs]


def open_session(
    runtime: str,
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    etdump: bool = False,
    names: tuple[list[str], list[str]] | None = None,
) -> ExecuTorchSession | LiteRtSession:
    """The session for a target `runtime/backend` (an `executorch/*` program holds its delegate
    already; a `litert/*` backend says whether the interpreter applies XNNPACK). `names`: the
    artifact's own input and output names in the model's order (LiteRT's signature keys)."""
    if runtime == "executorch":
        return ExecuTorchSession(artifact, inputs, threads, etdump)
    if runtime == "litert":
        return LiteRtSession(artifact, inputs, threads, delegate=backend == "xnnpack", names=names)
    raise ValueError(f"no host session for runtime {runtime!r}")
