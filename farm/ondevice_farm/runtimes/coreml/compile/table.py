"""Every ONNX op the CoreML lowering knows, and the function that lowers it."""

from __future__ import annotations

from ondevice_farm.runtimes.coreml.compile.lower_attention import TRANSFORMER_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_cast import CAST_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_control import CONTROL_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_einsum import EINSUM_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_elementwise import ELEMENTWISE_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_index import INDEX_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_nn import NN_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_norm import NORM_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_quant import QUANT_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_recurrent import RECURRENT_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_reduce import REDUCE_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lower_tensor import TENSOR_LOWERINGS
from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn


def lowering_table() -> dict[str, LowerFn]:
    """ONNX op type -> lowering function (a fresh dict: callers may narrow it)."""
    return {
        **ELEMENTWISE_LOWERINGS,
        **CAST_LOWERINGS,
        **NN_LOWERINGS,
        **NORM_LOWERINGS,
        **TENSOR_LOWERINGS,
        **REDUCE_LOWERINGS,
        **INDEX_LOWERINGS,
        **QUANT_LOWERINGS,
        **TRANSFORMER_LOWERINGS,
        **RECURRENT_LOWERINGS,
        **EINSUM_LOWERINGS,
        **CONTROL_LOWERINGS,
    }
