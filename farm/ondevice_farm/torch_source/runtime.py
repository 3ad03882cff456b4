"""PyTorch, imported only where a checkpoint is read: an optional extra (`ondevice-farm[torch]`)."""

from __future__ import annotations

from typing import Any

from ondevice_farm.errors import UsageError

#: the CPU wheel: a bare `pip install torch` on Linux pulls a multi-GB CUDA build the farm never uses
TORCH_INSTALL_HINT = (
    "pip install 'ondevice-farm[torch]' --extra-index-url https://download.pytorch.org/whl/cpu "
    "(the CPU wheel; a bare `pip install torch` downloads the CUDA build)"
)


def import_torch() -> Any:
    """The torch module, or a UsageError saying how to install the CPU build."""
    try:
        import torch
    except ImportError:
        raise UsageError(
            "PyTorch checkpoints need torch, which is not installed", hint=TORCH_INSTALL_HINT
        ) from None
    return torch


def torch_version() -> str:
    return str(import_torch().__version__)
