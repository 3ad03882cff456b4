"""The precision each op group computes in (int8 / fp16 / fp32), per target, from the compiled graph.

Op groups are named the same on every runtime (`conv`, `matmul`, `add`, `pool`, ...) so that
one target's ONNX Runtime graph and another's MIL program compare: "coreml/ane runs conv in
fp16; ort/cpu runs it in int8". Conversions (QuantizeLinear, DequantizeLinear, Cast, and MIL's
quantize/dequantize/cast/constexpr ops) are not compute and belong to no group.

ONNX Runtime: a fused quantized kernel (QLinearConv, QGemm, MatMulInteger, ...) is int8, and so
is an op that reads an 8-bit tensor (ORT runs MaxPool, Transpose, ... on uint8 once it drops the
QDQ pair around them). An op left between DequantizeLinear and QuantizeLinear is a QDQ node unit:
int8 in the graph shipped to a provider that takes QDQ units as quantized kernels (NNAPI, QNN,
XNNPACK, not installed here), fp32 in the graph ORT optimised here for the CPU (it left the unit
unfused, so the CPU runs it in float between the conversions). An op fed by an fp16 tensor is fp16.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # onnx costs an import 1-4 s: a report that only reads precisions never loads it
    import onnx

#: `_FLOAT16` (fixed by the ONNX spec)
_FLOAT16 = 10

#: op type (ONNX, ONNX Runtime contrib, or MIL) -> op group
OP_GROUPS: dict[str, str] = {
    **dict.fromkeys(
        ["Conv", "ConvTranspose", "QLinearConv", "ConvInteger", "NhwcQLinearConv", "FusedConv",
         "QLinearConvTranspose", "conv", "conv_transpose"],
        "conv",
    ),
    **dict.fromkeys(
        ["MatMul", "Gemm", "QGemm", "QLinearMatMul", "MatMulInteger", "FusedMatMul", "FusedGemm",
         "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "matmul", "linear"],
        "matmul",
    ),
    **dict.fromkeys(["Add", "QLinearAdd", "add"], "add"),
    **dict.fromkeys(["Mul", "QLinearMul", "mul"], "mul"),
    **dict.fromkeys(["MaxPool", "AveragePool", "QLinearAveragePool", "max_pool", "avg_pool"], "pool"),
    # CoreML computes a global pool as a reduction: both sides name it so
    **dict.fromkeys(
        ["GlobalAveragePool", "GlobalMaxPool", "QLinearGlobalAveragePool", "ReduceMean", "ReduceMax",
         "ReduceSum", "reduce_mean", "reduce_max", "reduce_sum"],
        "reduce",
    ),
    **dict.fromkeys(
        ["Relu", "Clip", "LeakyRelu", "QLinearLeakyRelu", "Sigmoid", "QLinearSigmoid", "HardSigmoid",
         "HardSwish", "Tanh", "Gelu", "FastGelu", "BiasGelu", "Erf", "relu", "relu6", "clip",
         "leaky_relu", "sigmoid", "sigmoid_hard", "tanh", "gelu", "erf", "silu"],
        "activation",
    ),
    **dict.fromkeys(["Softmax", "QLinearSoftmax", "softmax"], "softmax"),
    **dict.fromkeys(
        ["BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
         "SkipLayerNormalization", "SimplifiedLayerNormalization", "batch_norm", "layer_norm",
         "instance_norm"],
        "norm",
    ),
    **dict.fromkeys(["Concat", "QLinearConcat", "concat"], "concat"),
}  # fmt: skip

#: not compute: conversions between precisions, and pass-throughs
CONVERSIONS = frozenset(
    {
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast", "Identity",
        "quantize", "dequantize", "cast", "identity", "const",
        "constexpr_affine_dequantize", "constexpr_blockwise_shift_scale", "constexpr_cast",
        "constexpr_lut_to_dense", "constexpr_sparse_to_dense",
    }
)  # fmt: skip

#: ONNX Runtime kernels that compute on 8-bit integers
INT8_KERNELS = frozenset(
    {
        "QLinearConv", "QGemm", "QLinearMatMul", "MatMulInteger", "ConvInteger", "NhwcQLinearConv",
        "QLinearAdd", "QLinearMul", "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearSigmoid",
        "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat", "QLinearConvTranspose",
        "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QAttention", "QEmbedLayerNormalization",
    }
)  # fmt: skip

#: int8 kernels whose output is float (or int32)
_FLOAT_OUTPUT = frozenset({"MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulInteger", "ConvInteger"})

PrecisionByGroup = dict[str, dict[str, int]]


def op_group(op_type: str) -> str:
    return OP_GROUPS.get(op_type, op_type.lower())


def summarise(per_op: list[tuple[str, str]]) -> PrecisionByGroup:
    """(op type, precision) pairs -> group -> {precision: count}, sorted."""
    counts: dict[str, Counter[str]] = {}
    for op_type, precision in per_op:
        if op_type in CONVERSIONS:
            continue
        counts.setdefault(op_group(op_type), Counter())[precision] += 1
    return {group: dict(sorted(c.items())) for group, c in sorted(counts.items())}


def dominant(precisions: dict[str, int]) -> str:
    """The precision most ops of a group compute in ('mixed' where two tie)."""
    ranked = sorted(precisions.items(), key=lambda item: -item[1])
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return "mixed"
    return ranked[0][0] if ranked else "fp32"


def ort_op_precision(model: onnx.ModelProto, *, qdq_units_quantized: bool) -> PrecisionByGroup:
    """Precision per op group of an ONNX Runtime graph (see the module doc for the rules)."""
    graph = model.graph
    producers = {out: node.op_type for node in graph.node for out in node.output}
    readers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.op_type)
    fp16 = {init.name for init in graph.initializer if init.data_type == _FLOAT16}
    fp16 |= {
        vi.name for vi in [*graph.input, *graph.value_info]
        if vi.type.tensor_type.elem_type == _FLOAT16
    }  # fmt: skip
    for node in graph.node:
        if node.op_type == "Cast" and any(a.name == "to" and a.i == _FLOAT16 for a in node.attribute):
            fp16.update(node.output)
    # 8-bit tensors: what QuantizeLinear and the int8 kernels write, and what an op reading one
    # writes in turn (ORT drops the QDQ pair around MaxPool, Transpose, ... and runs them on uint8)
    int8_tensors: set[str] = set()
    per_op: list[tuple[str, str]] = []
    for node in graph.node:  # topological order, as ONNX requires
        reads_int8 = bool(node.input) and node.input[0] in int8_tensors and node.op_type != "DequantizeLinear"
        writes_int8 = node.op_type == "QuantizeLinear" or reads_int8
        writes_int8 |= node.op_type in INT8_KERNELS and node.op_type not in _FLOAT_OUTPUT
        if writes_int8:
            int8_tensors.update(node.output)
        precision = (
            "int8" if reads_int8 else _ort_node_precision(node, producers, readers, fp16, qdq_units_quantized)
        )
        per_op.append((node.op_type, precision))
    return summarise(per_op)


def _ort_node_precision(
    node: onnx.NodeProto,
    producers: dict[str, str],
    readers: dict[str, list[str]],
    fp16: set[str],
    qdq_units_quantized: bool,
) -> str:
    if node.op_type in INT8_KERNELS:
        return "int8"
    inputs = [name for name in node.input if name]
    if qdq_units_quantized and inputs and producers.get(inputs[0]) == "DequantizeLinear":
        outputs_quantized = all(
            set(readers.get(out, [])) <= {"QuantizeLinear"} and readers.get(out) for out in node.output if out
        )
        if outputs_quantized or (node.op_type in OP_GROUPS and op_group(node.op_type) in ("conv", "matmul")):
            return "int8"
    if any(name in fp16 for name in inputs):
        return "fp16"
    return "fp32"


def source_op_precision(model: onnx.ModelProto) -> PrecisionByGroup:
    """What the source model asks for: its QDQ units int8, the rest by dtype."""
    return ort_op_precision(model, qdq_units_quantized=True)


def precision_of(op_precision: PrecisionByGroup, fallback: str) -> str:
    """One word for a whole artifact: int8 where any group computes in int8, else the fallback."""
    if any("int8" in counts for counts in op_precision.values()):
        return "int8"
    return fallback


def describe(op_precision: PrecisionByGroup) -> str:
    """'conv int8, matmul int8, norm fp16' for a terminal line."""
    return ", ".join(f"{group} {dominant(counts)}" for group, counts in op_precision.items())


def as_json(op_precision: PrecisionByGroup) -> dict[str, Any]:
    return {group: dict(counts) for group, counts in op_precision.items()}
