"""ONNX Einsum -> MIL transposes, reductions and batched matmuls.

MIL's own `einsum` takes two rank-3/rank-4 equations only, so every equation is rewritten:
repeated labels inside one operand (diagonals) become a product with an identity mask and a
sum; labels that only one operand has and the output lacks are summed out first; each pair of
operands is then one batched matmul (shared output labels as batch, shared summed labels as the
inner dimension); the result is transposed to the output's order. Operands are contracted left
to right. Shapes must be static (the matmul's operands are reshaped); ellipses broadcast as
numpy has them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable

#: an ellipsis dim's label: "..." and its distance from the right end of the ellipsis
_ELLIPSIS = "..."


def parse_equation(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Labels of each operand and of the output; ellipsis dims get labels "...0" (rightmost), ..."""
    text = equation.replace(" ", "")
    inputs_text, arrow, output_text = text.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(ranks):
        raise NotLowerable(f"Einsum equation {equation!r} names {len(terms)} operands, {len(ranks)} given")
    operands = []
    widest = 0
    for term, rank in zip(terms, ranks, strict=True):
        letters = term.replace(_ELLIPSIS, "")
        if not letters.isalpha() and letters:
            raise NotLowerable(f"Einsum equation {equation!r} has a label that is not a letter")
        width = rank - len(letters)
        if width < 0 or (width and _ELLIPSIS not in term):
            raise NotLowerable(f"Einsum equation {equation!r} does not fit operand ranks {ranks}")
        widest = max(widest, width)
        operands.append(_expand(term, width))
    if arrow:
        output = _expand(output_text, widest)
    else:
        counts = Counter(label for labels in operands for label in labels if not label.startswith(_ELLIPSIS))
        output = _expand(_ELLIPSIS, widest) + sorted(label for label, n in counts.items() if n == 1)
    return operands, output


def _expand(term: str, width: int) -> list[str]:
    before, dots, after = term.partition(_ELLIPSIS)
    middle = [f"{_ELLIPSIS}{width - 1 - j}" for j in range(width)] if dots else []
    return [*before, *middle, *after]


@dataclass
class _Operand:
    value: Any
    labels: list[str]
    dims: list[int]


def _static(lw: Lowering, name: str) -> list[int]:
    dims = lw.static_dims(name)
    if any(d is None for d in dims):
        raise NotLowerable("Einsum needs static input shapes (use --shape)")
    return [int(d) for d in dims if d is not None]


def _reshape(lw: Lowering, op: _Operand, dims: list[int]) -> Any:
    if dims == op.dims:
        return op.value
    if not dims:
        return lw.mb.squeeze(x=op.value, axes=list(range(len(op.dims))))
    return lw.mb.reshape(x=op.value, shape=np.array(dims, np.int32))


def _transpose(lw: Lowering, op: _Operand, labels: list[str]) -> _Operand:
    perm = [op.labels.index(label) for label in labels]
    if perm == list(range(len(perm))):
        return _Operand(op.value, labels, op.dims)
    return _Operand(lw.mb.transpose(x=op.value, perm=perm), labels, [op.dims[p] for p in perm])


def _sum_out(lw: Lowering, op: _Operand, drop: set[str]) -> _Operand:
    axes = [i for i, label in enumerate(op.labels) if label in drop]
    if not axes:
        return op
    kept = [i for i in range(len(op.labels)) if i not in axes]
    value = lw.mb.reduce_sum(x=op.value, axes=axes, keep_dims=False)
    return _Operand(value, [op.labels[i] for i in kept], [op.dims[i] for i in kept])


def _diagonals(lw: Lowering, op: _Operand) -> _Operand:
    """A label repeated inside one operand takes the diagonal: times an identity, then summed."""
    while True:
        repeated = [label for label, n in Counter(op.labels).items() if n > 1]
        if not repeated:
            return op
        first = op.labels.index(repeated[0])
        second = op.labels.index(repeated[0], first + 1)
        size = op.dims[first]
        shape = [1] * len(op.dims)
        shape[first] = shape[second] = size
        mask = np.eye(size, dtype=np.float32).reshape(shape)
        dtype = lw.types.nptype_from_builtin(op.value.dtype) if hasattr(op.value, "dtype") else np.float32
        product = lw.mb.mul(x=op.value, y=mask.astype(dtype))
        value = lw.mb.reduce_sum(x=product, axes=[second], keep_dims=False)
        op = _Operand(
            value, op.labels[:second] + op.labels[second + 1 :], op.dims[:second] + op.dims[second + 1 :]
        )


def _contract(lw: Lowering, a: _Operand, b: _Operand, keep: set[str]) -> _Operand:
    """a and b as one batched matmul; the result holds the labels in `keep` that either had."""
    a = _sum_out(lw, a, {label for label in a.labels if label not in b.labels and label not in keep})
    b = _sum_out(lw, b, {label for label in b.labels if label not in a.labels and label not in keep})
    batch = [label for label in a.labels if label in b.labels and label in keep]
    inner = [label for label in a.labels if label in b.labels and label not in keep]
    a_only = [label for label in a.labels if label not in b.labels]
    b_only = [label for label in b.labels if label not in a.labels]
    a = _transpose(lw, a, batch + a_only + inner)
    b = _transpose(lw, b, batch + inner + b_only)
    size = dict(zip(a.labels, a.dims, strict=True))
    size_b = dict(zip(b.labels, b.dims, strict=True))
    for label in inner:
        if size[label] != size_b[label]:
            raise NotLowerable(
                f"Einsum label {label!r} is summed over sizes {size[label]} and {size_b[label]}"
            )
    a_batch, b_batch = a.dims[: len(batch)], b.dims[: len(batch)]
    rows, depth = math.prod(size[label] for label in a_only), math.prod(size[label] for label in inner)
    cols = math.prod(size_b[label] for label in b_only)
    product = lw.mb.matmul(
        x=_reshape(lw, a, [*a_batch, rows, depth]), y=_reshape(lw, b, [*b_batch, depth, cols])
    )
    batch_dims = [max(x, y) for x, y in zip(a_batch, b_batch, strict=True)]
    out_dims = batch_dims + [size[label] for label in a_only] + [size_b[label] for label in b_only]
    result = _Operand(product, batch + a_only + b_only, [*batch_dims, rows, cols])
    return _Operand(_reshape(lw, result, out_dims), result.labels, out_dims)


def lower_einsum(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    names = [name for name in node.input if name]
    equation = str(lw.attrs(node)["equation"])
    ranks = [lw.rank(name) for name in names]
    labels, output = parse_equation(equation, ranks)
    named = {label for term in labels for label in term}
    if len(set(output)) != len(output) or not set(output) <= named:
        raise NotLowerable(f"Einsum output {equation!r} repeats a label or names one no operand has")
    operands = [
        _diagonals(lw, _Operand(lw.var(name), list(term), _static(lw, name)))
        for name, term in zip(names, labels, strict=True)
    ]
    result = operands[0]
    for index, other in enumerate(operands[1:], start=1):
        later = {label for op in operands[index + 1 :] for label in op.labels}
        result = _contract(lw, result, other, set(output) | later)
    result = _sum_out(lw, result, set(result.labels) - set(output))
    result = _transpose(lw, result, output)
    return [lw.mb.identity(x=result.value, name=lw.name(node))]


EINSUM_LOWERINGS: dict[str, LowerFn] = {"Einsum": lower_einsum}
