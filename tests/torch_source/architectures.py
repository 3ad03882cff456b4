"""Small real architectures for the PyTorch source tests, built only when torch is installed."""

from __future__ import annotations

from typing import Any


def build(name: str) -> tuple[Any, Any]:
    """(module in eval mode, example input) for `cnn`, `encoder` or `upsampler`, seeded."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
            self.fc = nn.Linear(16, 10)

        def forward(self, x: Any) -> Any:
            x = torch.relu(self.bn(self.conv1(x)))
            x = nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.conv2(x))
            return self.fc(x.mean(dim=(2, 3)))

    class EncoderBlock(nn.Module):
        """Pre-norm transformer encoder block: LayerNorm, multi-head attention, GELU MLP."""

        def __init__(self, width: int = 32, heads: int = 4) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(width)
            self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(width)
            self.up = nn.Linear(width, 4 * width)
            self.down = nn.Linear(4 * width, width)

        def forward(self, x: Any) -> Any:
            h = self.norm1(x)
            attended, _ = self.attention(h, h, h, need_weights=False)
            x = x + attended
            return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))

    class Upsampler(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)

        def forward(self, x: Any) -> Any:
            return torch.sigmoid(self.up(torch.relu(self.conv(x))))

    modules = {
        "cnn": (SmallCNN(), (1, 3, 32, 32)),
        "encoder": (EncoderBlock(), (1, 8, 32)),
        "upsampler": (Upsampler(), (1, 4, 16, 16)),
    }
    module, shape = modules[name]
    with torch.no_grad():  # BatchNorm with non-trivial running statistics, as after training
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return module.eval(), torch.randn(*shape)


def save_exported(name: str, path: Any) -> Any:
    import torch

    module, example = build(name)
    torch.export.save(torch.export.export(module, (example,)), str(path))
    return path


def save_traced(name: str, path: Any) -> Any:
    import torch

    module, example = build(name)
    torch.jit.trace(module, (example,)).save(str(path))
    return example.numpy()
