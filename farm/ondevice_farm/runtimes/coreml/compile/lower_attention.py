"""ONNX's opset-23 transformer ops (Attention, RMSNormalization, RotaryEmbedding) -> MIL.

MIL has no fused form of these on the deployment targets the farm compiles for (iOS 17), so each is
spelt out in matmul/softmax/elementwise ops, following ONNX's reference implementation; shapes
must be static, since the masks and head layouts are computed at compile time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def _static(lw: Lowering, name: str, op: str) -> list[int]:
    dims = lw.static_dims(name)
    if any(d is None for d in dims):
        raise NotLowerable(f"{op} needs static input shapes")
    return [int(d) for d in dims if d is not None]


def lower_rms_norm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    axes = list(range(int(attrs.get("axis", -1)) % rank, rank))
    epsilon = np.float32(attrs.get("epsilon", 1e-5))
    mean_square = lw.mb.reduce_mean(x=lw.mb.mul(x=x, y=x), axes=axes, keep_dims=True)
    normalized = lw.mb.mul(x=x, y=lw.mb.rsqrt(x=mean_square, epsilon=epsilon.astype(_np_dtype(lw, x))))
    return [lw.mb.mul(x=normalized, y=lw.var(node.input[1]), name=lw.name(node))]


def _np_dtype(lw: Lowering, var: Any) -> Any:
    return lw.types.nptype_from_builtin(var.dtype)


def lower_rotary_embedding(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    dims = _static(lw, node.input[0], "RotaryEmbedding")
    x = lw.var(node.input[0])
    if len(dims) == 4:  # (batch, heads, seq, head) -> (batch, seq, heads, head)
        x = lw.mb.transpose(x=x, perm=[0, 2, 1, 3])
        batch, heads, seq, head = dims
    else:
        heads = int(attrs.get("num_heads", 0))
        if not heads:
            raise NotLowerable("3-D RotaryEmbedding needs num_heads")
        batch, seq, head = dims[0], dims[1], dims[2] // heads
        x = lw.mb.reshape(x=x, shape=np.array([batch, seq, heads, head], np.int32))
    rotary = int(attrs.get("rotary_embedding_dim", 0)) or head
    cos, sin = lw.var(node.input[1]), lw.var(node.input[2])
    if lw.has(node, 3):  # caches indexed by position: (max_position, rotary/2) -> (batch, seq, rotary/2)
        positions = lw.var(node.input[3])
        positions = lw.mb.cast(x=positions, dtype="int32") if positions.dtype != lw.types.int32 else positions
        cos, sin = (lw.mb.gather(x=cache, indices=positions, axis=0) for cache in (cos, sin))
    cos, sin = (lw.mb.expand_dims(x=cache, axes=[2]) for cache in (cos, sin))
    to_rotate = _slice_last(lw, x, dims=[batch, seq, heads, head], begin=0, end=rotary)
    if int(attrs.get("interleaved", 0)):
        first = _slice_last(lw, to_rotate, [batch, seq, heads, rotary], 0, rotary, stride=2)
        second = _slice_last(lw, to_rotate, [batch, seq, heads, rotary], 1, rotary, stride=2)
    else:
        first, second = lw.mb.split(x=to_rotate, num_splits=2, axis=-1)
    real = lw.mb.sub(x=lw.mb.mul(x=cos, y=first), y=lw.mb.mul(x=sin, y=second))
    imag = lw.mb.add(x=lw.mb.mul(x=sin, y=first), y=lw.mb.mul(x=cos, y=second))
    if int(attrs.get("interleaved", 0)):
        pairs = lw.mb.stack(values=[real, imag], axis=-1)
        rotated = lw.mb.reshape(x=pairs, shape=np.array([batch, seq, heads, rotary], np.int32))
    else:
        rotated = lw.mb.concat(values=[real, imag], axis=-1)
    if rotary < head:
        kept = _slice_last(lw, x, [batch, seq, heads, head], rotary, head)
        rotated = lw.mb.concat(values=[rotated, kept], axis=-1)
    if len(dims) == 4:
        return [lw.mb.transpose(x=rotated, perm=[0, 2, 1, 3], name=lw.name(node))]
    return [lw.mb.reshape(x=rotated, shape=np.array(dims, np.int32), name=lw.name(node))]


def _slice_last(lw: Lowering, x: Any, dims: list[int], begin: int, end: int, stride: int = 1) -> Any:
    """x[..., begin:end:stride]."""
    rank = len(dims)
    return lw.mb.slice_by_index(
        x=x,
        begin=np.array([0] * (rank - 1) + [begin], np.int32),
        end=np.array([*dims[:-1], end], np.int32),
        stride=np.array([1] * (rank - 1) + [stride], np.int32),
    )


def lower_attention(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    if lw.has(node, 6) and lw.has(node, 4):
        raise NotLowerable("Attention takes nonpad_kv_seqlen or a past cache, not both")
    q_dims = _static(lw, node.input[0], "Attention")
    q, k, v = (_heads_first(lw, node, i, attrs) for i in range(3))
    batch, q_heads, q_len, head = (int(d) for d in q.shape)
    if lw.has(node, 4) != lw.has(node, 5):
        raise NotLowerable("Attention needs past_key and past_value together")
    past_len = 0
    if lw.has(node, 4):
        past_len = _static(lw, node.input[4], "Attention")[2]
        k = lw.mb.concat(values=[lw.var(node.input[4]), k], axis=2)
        v = lw.mb.concat(values=[lw.var(node.input[5]), v], axis=2)
    present_key, present_value = k, v
    kv_heads, kv_len = int(k.shape[1]), int(k.shape[2])
    if kv_heads != q_heads:  # grouped-query attention: each K/V head serves q_heads/kv_heads queries
        repeat = np.arange(q_heads, dtype=np.int32) // (q_heads // kv_heads)
        k, v = (lw.mb.gather(x=t, indices=repeat, axis=1) for t in (k, v))
    dtype = _np_dtype(lw, q)
    scale = attrs.get("scale")
    scale = 1.0 / np.sqrt(head) if scale is None else float(scale)
    scores = lw.mb.mul(x=lw.mb.matmul(x=q, y=k, transpose_y=True), y=dtype(scale))
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        scores = lw.mb.mul(x=lw.mb.tanh(x=lw.mb.real_div(x=scores, y=dtype(softcap))), y=dtype(softcap))
    bias = _bias(lw, node, attrs, q_len=q_len, kv_len=kv_len, past_len=past_len, dtype=dtype)
    biased = scores if bias is None else lw.mb.add(x=scores, y=bias)
    weights = lw.mb.softmax(x=biased, axis=-1)
    if bias is not None:  # a row with every key masked gives zeros, not NaN (as ONNX's reference)
        masked = lw.mb.equal(x=lw.mb.reduce_max(x=bias, axes=[-1], keep_dims=True), y=dtype(-np.inf))
        weights = lw.mb.select(cond=masked, a=np.zeros([int(d) for d in weights.shape], dtype), b=weights)
    y = lw.mb.matmul(x=weights, y=v)
    if len(q_dims) == 3:
        y = lw.mb.transpose(x=y, perm=[0, 2, 1, 3])
        y = lw.mb.reshape(x=y, shape=np.array([batch, q_len, q_heads * int(v.shape[3])], np.int32))
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    qk = {0: scores, 1: scores, 2: biased, 3: weights}.get(mode)
    if qk is None:
        raise NotLowerable(f"qk_matmul_output_mode {mode} is not supported")
    values = (y, present_key, present_value, qk)
    return [
        lw.mb.identity(x=value, name=lw.name(node, i)) for i, value in enumerate(values[: len(node.output)])
    ]


def _heads_first(lw: Lowering, node: onnx.NodeProto, index: int, attrs: dict[str, Any]) -> Any:
    """Q, K or V as (batch, heads, seq, head): 3-D inputs (batch, seq, heads*head) are split by heads."""
    dims = _static(lw, node.input[index], "Attention")
    x = lw.var(node.input[index])
    if len(dims) == 4:
        return x
    heads = int(attrs.get("q_num_heads" if index == 0 else "kv_num_heads", 0))
    if len(dims) != 3 or not heads:
        raise NotLowerable("3-D Attention inputs need q_num_heads and kv_num_heads")
    split = lw.mb.reshape(x=x, shape=np.array([dims[0], dims[1], heads, dims[2] // heads], np.int32))
    return lw.mb.transpose(x=split, perm=[0, 2, 1, 3])


def _bias(
    lw: Lowering,
    node: onnx.NodeProto,
    attrs: dict[str, Any],
    *,
    q_len: int,
    kv_len: int,
    past_len: int,
    dtype: Any,
) -> Any:
    """The additive mask (0 attended, -inf masked): attn_mask, causal and sliding window together."""
    bias: Any = None
    if lw.has(node, 3):
        mask = lw.var(node.input[3])
        mask_dims = _static(lw, node.input[3], "Attention")
        if mask.dtype == lw.types.bool:
            mask = lw.mb.select(cond=mask, a=np.zeros(mask_dims, dtype), b=np.full(mask_dims, -np.inf, dtype))
        if mask_dims[-1] < kv_len:  # a mask shorter than the keys masks the rest
            pad = np.full([*mask_dims[:-1], kv_len - mask_dims[-1]], -np.inf, dtype)
            mask = lw.mb.concat(values=[mask, pad], axis=-1)
        bias = mask
    # the query's position among the keys: after the past cache, or (an external cache, given by
    # its valid lengths per batch) that length less the queries, as ONNX's reference has it
    offset: Any = past_len
    valid: Any = None
    if lw.has(node, 6):
        lengths = lw.const(node.input[6])
        if lengths is None:
            raise NotLowerable("Attention's nonpad_kv_seqlen must be a constant")
        valid = lengths.reshape(-1, 1, 1, 1).astype(np.int64)
        offset = valid - q_len
    rows = np.arange(q_len).reshape(-1, 1) + offset
    cols = np.arange(kv_len).reshape(1, -1)
    allowed = np.ones(np.broadcast_shapes(np.shape(rows), (q_len, kv_len)), bool)
    if valid is not None:
        allowed = allowed & (cols < valid)
    if int(attrs.get("is_causal", 0)):
        allowed &= cols <= rows
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    if left >= 0:
        allowed &= rows - cols <= left
    if right >= 0:
        allowed &= cols - rows <= right
    if not allowed.all():
        fixed = np.where(allowed, 0, -np.inf).astype(dtype)
        bias = fixed if bias is None else lw.mb.add(x=bias, y=fixed)
    return bias


TRANSFORMER_LOWERINGS: dict[str, LowerFn] = {
    "Attention": lower_attention,
    "RMSNormalization": lower_rms_norm,
    "RotaryEmbedding": lower_rotary_embedding,
}
