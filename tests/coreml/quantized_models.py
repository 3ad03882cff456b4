"""QDQ models made by ONNX Runtime's own static quantizer from the real-architecture builders."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from tests.coreml.onnx_models import resnet_blocks, transformer_encoder

CALIBRATION_BATCHES = 8


def feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = model.graph.input[0]
    dims = [d.dim_value for d in first.type.tensor_type.shape.dim]
    if first.name == "input_ids":
        return {"input_ids": rng.integers(0, 50, dims).astype(np.int64)}
    return {first.name: rng.standard_normal(dims).astype(np.float32)}


class _Calibration:
    """onnxruntime.quantization.CalibrationDataReader, duck-typed: seeded batches."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._batches: Iterator[dict[str, np.ndarray]] = iter(
            feeds(model, 1000 + i) for i in range(CALIBRATION_BATCHES)
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def quantize_qdq(model: onnx.ModelProto, out_dir: Path, *, per_channel: bool) -> tuple[Path, Path]:
    """(float model, its QDQ form): int8 weights, uint8 activations, as quantize_static makes them."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    out_dir.mkdir(parents=True, exist_ok=True)
    float_path, qdq_path = out_dir / "float.onnx", out_dir / "qdq.onnx"
    onnx.save(model, str(float_path))
    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" advice
    quantize_static(
        str(float_path),
        str(qdq_path),
        _Calibration(model),  # type: ignore[arg-type]
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    return float_path, qdq_path


ARCHITECTURES = {"resnet": resnet_blocks, "encoder": transformer_encoder}
