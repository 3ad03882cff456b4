"""LiteRT's session module: `ai_edge_litert`'s interpreter, with XNNPACK's delegate for a
`litert/xnnpack` target and the builtin kernels only otherwise. numpy and the runtime only, no
farm: it is pushed to units as one file (`ondevice_farm_agents.runtimes.spec` has the contract).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: the backend whose interpreter applies the default delegates (XNNPACK)
DELEGATE_BACKEND = "xnnpack"


def default_threads() -> int:
    """LiteRT's interpreter takes the CPU count unless told: one thread per CPU this process may
    run on (`spec.default_threads`, copied: this file stays standalone)."""
    return len(os.sched_getaffinity(0)) or 1


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
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    etdump: bool = False,
    names: tuple[list[str], list[str]] | None = None,
) -> LiteRtSession:
    """The interpreter of a `litert/<backend>` model: the backend says whether it applies XNNPACK.
    `names`: the artifact's signature keys in the model's order. LiteRT has no per-op profiler,
    so `etdump` is never asked for."""
    return LiteRtSession(artifact, inputs, threads, delegate=backend == DELEGATE_BACKEND, names=names)
