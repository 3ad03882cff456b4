"""The reference of a PyTorch source: the checkpoint itself, eager, fp32, on the host CPU.

Every target (the ONNX export on ONNX Runtime, both CoreML routes) is diffed against what the
model the user trained computes, so the export's own error shows instead of hiding in the
reference. Outputs are named like the ONNX export's (`output`, `output_0`, ...), in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import ModelError
from ondevice_farm.reference import cached_outputs, inputs_digest
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.onnx_export import output_names
from ondevice_farm.torch_source.runtime import import_torch


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flatten(item)]
    if isinstance(value, dict):
        return [leaf for key in value for leaf in _flatten(value[key])]
    return [value]


def run_eager(checkpoint: TorchCheckpoint, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The checkpoint's outputs on `inputs`, flattened in order."""
    torch = import_torch()
    module = checkpoint.module()
    try:
        with torch.no_grad():
            result = module(*checkpoint.example_args(inputs))
    except Exception as exc:  # anything the model's own code raises on these inputs
        raise ModelError(f"{checkpoint.path}: the eager reference run failed: {exc}") from None
    leaves = _flatten(result)
    if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        raise ModelError(f"{checkpoint.path}: outputs must be tensors (or tuples/lists/dicts of them)")
    return [leaf.detach().cpu().numpy() for leaf in leaves]


def eager_reference(
    checkpoint: TorchCheckpoint, inputs: dict[str, np.ndarray], cache_dir: Path
) -> dict[str, np.ndarray]:
    """Eager outputs by export output name, cached by checkpoint hash and inputs."""
    cached = cache_dir / f"torch-{checkpoint.sha256}-{inputs_digest(inputs)[:32]}.npz"

    def compute() -> dict[str, np.ndarray]:
        values = run_eager(checkpoint, inputs)
        return dict(zip(output_names(len(values)), values, strict=True))

    return cached_outputs(cached, compute)
