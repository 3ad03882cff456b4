"""ONNX normalisation ops (BatchNormalization, LayerNormalization, InstanceNormalization,
GroupNormalization) -> MIL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def lower_batch_norm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    if int(attrs.get("training_mode", 0)):
        return _batch_norm_training(lw, node, attrs)
    epsilon = float(attrs.get("epsilon", 1e-5))
    x = lw.var(node.input[0])
    if any(lw.const(node.input[i]) is None for i in range(1, 5)):
        # parameters known only at run time: the spec's arithmetic
        rank = len(x.shape)
        mean, var = (_per_channel(lw, node.input[i], rank) for i in (3, 4))
        scaled = lw.mb.mul(x=lw.mb.sub(x=x, y=mean), y=_per_channel(lw, node.input[1], rank))
        normalised = lw.mb.real_div(x=scaled, y=lw.mb.sqrt(x=lw.mb.add(x=var, y=np.float32(epsilon))))
        return [lw.mb.add(x=normalised, y=_per_channel(lw, node.input[2], rank), name=lw.name(node))]
    scale, bias, mean, var = (lw.require_const(node, i, "BatchNormalization parameters") for i in range(1, 5))
    if len(x.shape) in (3, 4, 5):
        return [
            lw.mb.batch_norm(
                x=x,
                mean=mean,
                variance=var,
                gamma=scale,
                beta=bias,
                epsilon=np.float32(epsilon),
                name=lw.name(node),
            )
        ]
    factor = (scale / np.sqrt(var + epsilon)).astype(np.float32)
    shift = (bias - mean * factor).astype(np.float32)
    trailing = [1] * (len(x.shape) - 2)
    y = lw.mb.mul(x=x, y=factor.reshape([-1, *trailing]))
    return [lw.mb.add(x=y, y=shift.reshape([-1, *trailing]), name=lw.name(node))]


def _batch_norm_training(lw: Lowering, node: onnx.NodeProto, attrs: dict[str, Any]) -> Sequence[Any]:
    """Training-mode BatchNormalization, as the spec computes it (deterministic, unlike Dropout's):
    normalised by the batch's own mean and (population) variance over every axis but the channel;
    the running mean and variance outputs mix the given ones with the batch's by `momentum`."""
    mb = lw.mb
    x = lw.var(node.input[0])
    rank = len(x.shape)
    axes = [0, *range(2, rank)]
    mean = mb.reduce_mean(x=x, axes=axes, keep_dims=True)
    centered = mb.sub(x=x, y=mean)
    var = mb.reduce_mean(x=mb.mul(x=centered, y=centered), axes=axes, keep_dims=True)
    epsilon = np.float32(attrs.get("epsilon", 1e-5))
    scaled = mb.mul(x=centered, y=_per_channel(lw, node.input[1], rank))
    normalised = mb.real_div(x=scaled, y=mb.sqrt(x=mb.add(x=var, y=epsilon)))
    results = [mb.add(x=normalised, y=_per_channel(lw, node.input[2], rank), name=lw.name(node))]
    momentum = np.float32(attrs.get("momentum", 0.9))
    for index, batch in ((1, mean), (2, var)):
        if len(node.output) <= index or not node.output[index]:
            results.append(None)  # not asked for: never read
            continue
        # running mean (input 3) and variance (input 4) by momentum, the batch's by the rest
        kept = mb.mul(x=lw.var(node.input[index + 2]), y=momentum)
        mixed = mb.mul(x=mb.reshape(x=batch, shape=[-1]), y=np.float32(1) - momentum)
        results.append(mb.add(x=kept, y=mixed, name=lw.name(node, index)))
    return results


def _per_channel(lw: Lowering, name: str, rank: int) -> Any:
    """A (C,) parameter shaped (C, 1, ...) to broadcast over a rank-`rank` NC... tensor."""
    shape = [-1] + [1] * (rank - 2)
    known = lw.const(name)
    if known is not None:
        return known.astype(np.float32).reshape(shape)
    return lw.mb.reshape(x=lw.var(name), shape=shape)


def lower_layer_norm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    if any(node.output[1:]):
        return _layer_norm_with_statistics(lw, node)
    attrs = lw.attrs(node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    axis = int(attrs.get("axis", -1)) % rank
    axes = list(range(axis, rank))
    epsilon = np.float32(attrs.get("epsilon", 1e-5))
    normalized = [d for d in x.shape[axis:]]
    scale, bias = lw.const(node.input[1]), lw.const(node.input[2]) if lw.has(node, 2) else None
    static = all(isinstance(d, (int, np.integer)) for d in normalized)
    if scale is not None and static and (bias is not None or not lw.has(node, 2)):
        gamma = np.broadcast_to(scale, normalized).astype(np.float32)
        kwargs = {"beta": np.broadcast_to(bias, normalized).astype(np.float32)} if bias is not None else {}
        return [lw.mb.layer_norm(x=x, axes=axes, gamma=gamma, epsilon=epsilon, name=lw.name(node), **kwargs)]
    y = lw.mb.layer_norm(x=x, axes=axes, epsilon=epsilon)
    y = lw.mb.mul(x=y, y=lw.var(node.input[1]), **({} if lw.has(node, 2) else {"name": lw.name(node)}))
    if lw.has(node, 2):
        y = lw.mb.add(x=y, y=lw.var(node.input[2]), name=lw.name(node))
    return [y]


def _layer_norm_with_statistics(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    """LayerNormalization asked for its Mean and InvStdDev too (training exports keep them): MIL's
    layer_norm gives only Y, so all three are spelt out; the statistics keep the normalised axes as 1s."""
    attrs = lw.attrs(node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    axes = list(range(int(attrs.get("axis", -1)) % rank, rank))
    epsilon = np.float32(attrs.get("epsilon", 1e-5))
    mean = lw.mb.reduce_mean(x=x, axes=axes, keep_dims=True)
    centred = lw.mb.sub(x=x, y=mean)
    variance = lw.mb.reduce_mean(x=lw.mb.mul(x=centred, y=centred), axes=axes, keep_dims=True)
    inv_std = lw.mb.rsqrt(x=variance, epsilon=epsilon)
    y = lw.mb.mul(x=lw.mb.mul(x=centred, y=inv_std), y=lw.var(node.input[1]))
    if lw.has(node, 2):
        y = lw.mb.add(x=y, y=lw.var(node.input[2]))
    named = [lw.mb.identity(x=value, name=lw.name(node, i)) for i, value in enumerate((y, mean, inv_std))]
    return named[: len(node.output)]


def lower_instance_norm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    scale = lw.require_const(node, 1, "InstanceNormalization scale").astype(np.float32)
    bias = lw.require_const(node, 2, "InstanceNormalization bias").astype(np.float32)
    epsilon = np.float32(lw.attrs(node).get("epsilon", 1e-5))
    x = lw.var(node.input[0])
    if len(x.shape) not in (3, 4):
        raise NotLowerable("InstanceNormalization is supported on 3-D and 4-D inputs")
    return [lw.mb.instance_norm(x=x, gamma=scale, beta=bias, epsilon=epsilon, name=lw.name(node))]


def lower_group_norm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    groups = int(attrs["num_groups"])
    epsilon = np.float32(attrs.get("epsilon", 1e-5))
    x = lw.var(node.input[0])
    dims = lw.static_dims(node.input[0])
    channels = dims[1]
    if channels is None or len(dims) < 3:
        raise NotLowerable("GroupNormalization needs a static channel dim and rank 3 or more")
    scale = lw.require_const(node, 1, "GroupNormalization scale").astype(np.float32).reshape(-1)
    bias = lw.require_const(node, 2, "GroupNormalization bias").astype(np.float32).reshape(-1)
    if scale.size == groups and groups != channels:
        # opset 18 gave one scale/bias per group (opset 21 per channel): spread them over the channels
        scale, bias = np.repeat(scale, channels // groups), np.repeat(bias, channels // groups)
    # normalise over each group's channels and all spatial positions, then scale per channel
    if dims[0] is not None:
        grouped_shape = [dims[0], groups, -1]
    else:
        grouped_shape = [-1, groups, channels // groups * _spatial(dims)]
    grouped = lw.mb.reshape(x=x, shape=np.array(grouped_shape, np.int32))
    normalized = lw.mb.layer_norm(x=grouped, axes=[2], epsilon=epsilon)
    if all(d is not None for d in dims):
        restored = lw.mb.reshape(x=normalized, shape=np.array(dims, np.int32))
    else:
        restored = lw.mb.reshape(x=normalized, shape=lw.mb.shape(x=x))
    per_channel = [-1] + [1] * (len(dims) - 2)
    scaled = lw.mb.mul(x=restored, y=scale.reshape(per_channel))
    return [lw.mb.add(x=scaled, y=bias.reshape(per_channel), name=lw.name(node))]


def _spatial(dims: list[int | None]) -> int:
    if any(d is None for d in dims[2:]):
        raise NotLowerable("GroupNormalization with a free batch needs static spatial dims")
    return int(np.prod([d for d in dims[2:] if d is not None]))


def lower_lrn(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    x = lw.var(node.input[0])
    if len(x.shape) not in (3, 4):
        raise NotLowerable("LRN is supported on 3-D and 4-D inputs (MIL's local_response_norm)")
    return [
        lw.mb.local_response_norm(
            x=x,
            size=int(attrs["size"]),
            alpha=np.float32(attrs.get("alpha", 1e-4)),
            beta=np.float32(attrs.get("beta", 0.75)),
            k=np.float32(attrs.get("bias", 1.0)),
            name=lw.name(node),
        )
    ]


NORM_LOWERINGS: dict[str, LowerFn] = {
    "LRN": lower_lrn,
    "BatchNormalization": lower_batch_norm,
    "LayerNormalization": lower_layer_norm,
    "InstanceNormalization": lower_instance_norm,
    "GroupNormalization": lower_group_norm,
}
