"""A PyTorch checkpoint as the farm's source: `.pt2` (torch.export) or `.pt` (TorchScript).

torch is imported only inside these modules' functions (extra `ondevice-farm[torch]`).

    runtime      import torch, or say how to install the CPU build
    checkpoint   load a checkpoint, name and shape its inputs
    eager        the reference: the checkpoint itself, eager fp32 on the host CPU
    onnx_export  torch.onnx.export (dynamo, else TorchScript), cached; or its one-line refusal
    ingest       all of the above for one submission: TorchSource
    routes       both CoreML routes side by side, predicted on the host

The `coreml-torch/*` compiler itself is `ondevice_farm.runtimes.coreml.compile.torch_route`.
"""

from __future__ import annotations

from ondevice_farm.torch_source.checkpoint import CHECKPOINT_KINDS, TorchCheckpoint, is_torch_checkpoint

__all__ = ["CHECKPOINT_KINDS", "TorchCheckpoint", "is_torch_checkpoint"]
