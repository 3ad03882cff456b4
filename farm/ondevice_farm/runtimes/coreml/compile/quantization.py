"""How a compile treats quantization (QDQ models): the plan, and constant 8-bit weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

QUANTIZATION_MODES = ("keep", "float")
DEFAULT_QUANTIZATION = "keep"

#: iOS opset number from which each MIL quantization form exists
WEIGHT_OP_BY_IOS = ((18, "constexpr_blockwise_shift_scale"), (16, "constexpr_affine_dequantize"))
ACTIVATION_OPS_FROM_IOS = 17


@dataclass(frozen=True)
class QuantizationPlan:
    """What the lowering does with QDQ for one compile: the mode and the MIL forms it may use."""

    mode: str = DEFAULT_QUANTIZATION
    #: the constexpr op that holds 8-bit weights, or None where they fold to float
    weight_op: str | None = None
    #: iOS 17 quantize/dequantize on activations
    activation_ops: bool = False

    @classmethod
    def for_target(cls, mode: str, ios: int) -> QuantizationPlan:
        """The plan for `mode` on an iOS version (macOS targets by their iOS equivalent)."""
        if mode == "float":
            return cls(mode="float")
        weight_op = next((op for since, op in WEIGHT_OP_BY_IOS if ios >= since), None)
        return cls(mode=mode, weight_op=weight_op, activation_ops=ios >= ACTIVATION_OPS_FROM_IOS)

    def describe(self) -> dict[str, str]:
        if self.mode == "float":
            return {
                "mode": "float",
                "weights": "float constants",
                "activations": "float (each QDQ pair a clip to the quantized range)",
            }
        return {
            "mode": "keep",
            "weights": f"8-bit in the package ({self.weight_op})" if self.weight_op else "float constants",
            "activations": (
                "int8/uint8 between quantize and dequantize (iOS 17 ops)"
                if self.activation_ops
                else "float (this deployment target has no quantize op)"
            ),
        }


@dataclass(frozen=True)
class QuantizedWeight:
    """A constant 8-bit tensor and how it dequantizes: scale * (data - zero_point)."""

    data: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    #: the axis a vector scale runs along; None for one scale
    axis: int | None

    def dequantized(self) -> np.ndarray:
        return dequantize_array(self.data, self.scale, self.zero_point, self.axis)

    def for_linear(self, transpose: bool, factor: float) -> QuantizedWeight:
        """The weight as MIL `linear` wants it ((N, K), ONNX B transposed when transB=0), scaled."""
        data, axis = self.data, self.axis
        if transpose:
            data = data.T
            axis = None if axis is None else 1 - axis
        return QuantizedWeight(
            data, (self.scale * np.float32(factor)).astype(np.float32), self.zero_point, axis
        )


def along(vector: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    if axis is None or vector.ndim == 0:
        return vector
    shape = [1] * rank
    shape[axis] = -1
    return vector.reshape(shape)


def dequantize_array(
    data: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int | None
) -> np.ndarray:
    """ONNX DequantizeLinear in float32: (x - zero_point) * scale, per tensor or along `axis`."""
    rank = data.ndim
    shifted = data.astype(np.int32) - along(zero_point.astype(np.int32), axis, rank)
    result: np.ndarray = (shifted.astype(np.float32) * along(scale.astype(np.float32), axis, rank)).astype(
        np.float32
    )
    return result


def constexpr_weight(mb: Any, weight_op: str, weight: QuantizedWeight, name: str) -> Any:
    """The MIL constexpr op that holds `weight` 8-bit in the package and dequantizes it at load."""
    if weight_op == "constexpr_blockwise_shift_scale":
        shape = [1] * weight.data.ndim
        if weight.axis is not None:
            shape[weight.axis] = -1
        return mb.constexpr_blockwise_shift_scale(
            data=weight.data,
            scale=weight.scale.reshape(shape).astype(np.float32),
            offset=weight.zero_point.reshape(shape).astype(weight.data.dtype),
            name=name,
        )
    return mb.constexpr_affine_dequantize(
        quantized_data=weight.data,
        scale=weight.scale.astype(np.float32),
        zero_point=weight.zero_point.astype(weight.data.dtype),
        axis=0 if weight.axis is None else weight.axis,
        name=name,
    )
