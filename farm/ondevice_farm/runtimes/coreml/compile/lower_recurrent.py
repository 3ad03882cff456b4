"""ONNX's recurrent ops (LSTM, GRU, RNN) -> MIL, unrolled over a static sequence length.

Unrolled rather than MIL's `lstm`/`gru`/`rnn` ops, because those cannot hold ONNX's
semantics: MIL's gru applies the reset gate after the recurrent matmul with one bias (ONNX's
default `linear_before_reset=0` applies it before), its ops take constant weights only, no
`sequence_lens`, no activation parameters (`alpha`/`beta`) and no `layout`. An unrolled step
is a matmul, an add, a split and the gate activations, which every compute unit runs and the
host executor checks op by op. The cost is program size (about ten ops per step and
direction), so the sequence length must be static and at most `DEFAULT_MAX_UNROLLED_STEPS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable

#: longest sequence unrolled into the program (each step of each direction adds ~10 MIL ops)
DEFAULT_MAX_UNROLLED_STEPS = 512

#: ONNX activation name (lower case) -> how many of activation_alpha / activation_beta it takes,
#: and their defaults when the lists run out (as ONNX Runtime reads them)
_PARAMETERS: dict[str, tuple[int, int, float, float]] = {
    "sigmoid": (0, 0, 0.0, 0.0),
    "tanh": (0, 0, 0.0, 0.0),
    "relu": (0, 0, 0.0, 0.0),
    "softsign": (0, 0, 0.0, 0.0),
    "softplus": (0, 0, 0.0, 0.0),
    "leakyrelu": (1, 0, 0.01, 0.0),
    "thresholdedrelu": (1, 0, 1.0, 0.0),
    "elu": (1, 0, 1.0, 0.0),
    "hardsigmoid": (1, 1, 0.2, 0.5),
    "scaledtanh": (1, 1, 1.0, 1.0),
    "affine": (1, 1, 1.0, 0.0),
}

#: op type -> gates per step, and the default activations of one direction
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


@dataclass(frozen=True)
class Activation:
    """One activation function of a recurrence, with the parameters ONNX gave it."""

    name: str
    alpha: float
    beta: float

    def apply(self, lw: Lowering, x: Any) -> Any:
        mb, alpha, beta = lw.mb, np.float32(self.alpha), np.float32(self.beta)
        simple = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "softsign": "softsign"}
        if self.name in simple:
            return getattr(mb, simple[self.name])(x=x)
        if self.name == "softplus":
            return mb.softplus(x=x)
        if self.name == "leakyrelu":
            return mb.leaky_relu(x=x, alpha=alpha)
        if self.name == "thresholdedrelu":
            return mb.thresholded_relu(x=x, alpha=alpha)
        if self.name == "elu":
            return mb.elu(x=x, alpha=alpha)
        if self.name == "hardsigmoid":
            return mb.sigmoid_hard(x=x, alpha=alpha, beta=beta)
        if self.name == "scaledtanh":
            return mb.scaled_tanh(x=x, alpha=alpha, beta=beta)
        return mb.linear_activation(x=x, alpha=alpha, beta=beta)


def activations(node: onnx.NodeProto, attrs: dict[str, Any], directions: int) -> list[list[Activation]]:
    """The activation functions of each direction, alpha and beta consumed in order of use."""
    per_direction = len(_DEFAULT_ACTIVATIONS[node.op_type])
    names = [str(n) for n in attrs.get("activations", _DEFAULT_ACTIVATIONS[node.op_type] * directions)]
    if len(names) != per_direction * directions:
        raise NotLowerable(f"{len(names)} activations given, {per_direction * directions} expected")
    alphas = iter(float(a) for a in attrs.get("activation_alpha", []))
    betas = iter(float(b) for b in attrs.get("activation_beta", []))
    functions = []
    for name in names:
        key = name.lower()
        if key not in _PARAMETERS:
            raise NotLowerable(f"activation {name!r} is not one ONNX defines for {node.op_type}")
        takes_alpha, takes_beta, alpha, beta = _PARAMETERS[key]
        alpha = next(alphas, alpha) if takes_alpha else alpha
        beta = next(betas, beta) if takes_beta else beta
        functions.append(Activation(key, alpha, beta))
    return [functions[d * per_direction : (d + 1) * per_direction] for d in range(directions)]


@dataclass(frozen=True)
class Recurrence:
    """What one LSTM/GRU/RNN node asks for, read once."""

    op_type: str
    hidden: int
    steps: int
    #: "forward" or "reverse" per direction ("bidirectional" is both)
    directions: tuple[str, ...]
    functions: list[list[Activation]]
    clip: float | None
    batch_first: bool
    linear_before_reset: bool
    input_forget: bool


def read_recurrence(lw: Lowering, node: onnx.NodeProto, max_steps: int) -> Recurrence:
    attrs = lw.attrs(node)
    direction = str(attrs.get("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise NotLowerable(f"direction {direction!r} is not one ONNX defines")
    directions = ("forward", "reverse") if direction == "bidirectional" else (direction,)
    batch_first = int(attrs.get("layout", 0)) == 1
    if lw.rank(node.input[0]) != 3:
        raise NotLowerable(f"{node.op_type} input X must have rank 3")
    steps = lw.static_dims(node.input[0])[1 if batch_first else 0]
    if steps is None:
        raise NotLowerable(f"{node.op_type} is unrolled: its sequence length must be static (use --shape)")
    if steps > max_steps:
        raise NotLowerable(f"{node.op_type} is unrolled: {steps} steps exceed the limit of {max_steps}")
    weight_rows = lw.static_dims(node.input[1])[1]
    hidden = int(attrs.get("hidden_size", (weight_rows or 0) // _GATES[node.op_type]))
    if hidden <= 0:
        raise NotLowerable(f"{node.op_type} needs hidden_size or a weight of static shape")
    clip = attrs.get("clip")
    return Recurrence(
        op_type=node.op_type,
        hidden=hidden,
        steps=steps,
        directions=directions,
        functions=activations(node, attrs, len(directions)),
        clip=None if clip is None else float(clip),
        batch_first=batch_first,
        linear_before_reset=bool(int(attrs.get("linear_before_reset", 0))),
        input_forget=bool(int(attrs.get("input_forget", 0))),
    )


def _pick(lw: Lowering, node: onnx.NodeProto, index: int, direction: int, axis: int) -> Any:
    """Input `index` of the node for one direction (its `axis` taken at `direction`), or None."""
    if not lw.has(node, index):
        return None
    known = lw.const(node.input[index])
    if known is not None:
        return np.take(known, direction, axis=axis).astype(np.float32)
    return lw.mb.gather(x=lw.var(node.input[index]), indices=np.int32(direction), axis=axis)


def _add(lw: Lowering, a: Any, b: Any) -> Any:
    """a + b where either may be None (a zero that costs no op) or a constant."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return (a + b).astype(np.float32)
    return lw.mb.add(x=a, y=b)


def _mul(lw: Lowering, a: Any, b: Any) -> Any:
    return None if a is None or b is None else lw.mb.mul(x=a, y=b)


def _rows(lw: Lowering, value: Any, begin: int, end: int) -> Any:
    """Rows [begin, end) of a weight or bias (a constant, or a Var sliced in the program)."""
    if value is None or isinstance(value, np.ndarray):
        return None if value is None else value[begin:end]
    rank = len(value.shape)
    return lw.mb.slice_by_index(
        x=value,
        begin=[begin] + [0] * (rank - 1),
        end=[end] + [0] * (rank - 1),
        end_mask=[False] + [True] * (rank - 1),
    )


class _Unroller:
    """Builds one direction's steps. States are [1, batch, hidden]: each step's output is one
    slice of Y as it is, and no squeeze is needed between steps."""

    def __init__(self, lw: Lowering, rec: Recurrence, dtype: Any) -> None:
        self.lw, self.rec, self.dtype = lw, rec, dtype

    def project(self, x: Any, weight: Any, bias: Any) -> list[Any]:
        """x [steps, batch, in] @ weight^T + bias, split into one [1, batch, rows] per step."""
        mb = self.lw.mb
        w = weight.astype(self.dtype) if isinstance(weight, np.ndarray) else weight
        projected = mb.matmul(x=x, y=w, transpose_y=True)
        if bias is not None:
            projected = mb.add(
                x=projected, y=bias.astype(self.dtype) if isinstance(bias, np.ndarray) else bias
            )
        if self.rec.steps == 1:
            return [projected]
        return list(mb.split(x=projected, num_splits=self.rec.steps, axis=0))

    def recurrent(self, h: Any, weight: Any) -> Any:
        """h @ weight^T, or None where h is the zero initial state."""
        if h is None:
            return None
        w = weight.astype(self.dtype) if isinstance(weight, np.ndarray) else weight
        return self.lw.mb.matmul(x=h, y=w, transpose_y=True)

    def gate(self, fn: Activation, pre: Any) -> Any:
        if self.rec.clip is not None:
            pre = self.lw.mb.clip(x=pre, alpha=np.float32(-self.rec.clip), beta=np.float32(self.rec.clip))
        return fn.apply(self.lw, pre)

    def split(self, value: Any, parts: int) -> list[Any]:
        return [value] if parts == 1 else list(self.lw.mb.split(x=value, num_splits=parts, axis=2))

    def hold(self, mask: Any, new: Any, old: Any) -> Any:
        """Past a batch entry's sequence length the state is held (and its output is zero)."""
        if mask is None:
            return new
        return self.lw.mb.select(cond=mask, a=new, b=np.zeros((), self.dtype) if old is None else old)


def _masks(lw: Lowering, node: onnx.NodeProto, rec: Recurrence) -> list[Any]:
    """Per step, a [1, batch, 1] condition "step < sequence_lens", or None where every entry runs
    the whole sequence."""
    if not lw.has(node, 4):
        return [None] * rec.steps
    lengths = lw.const(node.input[4])
    if lengths is not None:
        lengths = lengths.reshape(-1)
        if np.all(lengths == rec.steps):
            return [None] * rec.steps
        return [(t < lengths).reshape(1, -1, 1) for t in range(rec.steps)]
    mb = lw.mb
    column = mb.expand_dims(x=mb.cast(x=lw.var(node.input[4]), dtype="int32"), axes=[0, 2])
    return [mb.less(x=np.int32(t), y=column) for t in range(rec.steps)]


def _input_sequence(lw: Lowering, node: onnx.NodeProto, rec: Recurrence) -> Any:
    x = lw.var(node.input[0])
    return lw.mb.transpose(x=x, perm=[1, 0, 2]) if rec.batch_first else x


def _initial(lw: Lowering, node: onnx.NodeProto, index: int, rec: Recurrence, direction: int) -> Any:
    """The initial state of one direction as [1, batch, hidden], or None for zeros."""
    state = _pick(lw, node, index, direction, axis=1 if rec.batch_first else 0)
    if state is None or isinstance(state, np.ndarray):
        return None if state is None or not np.any(state) else state[None]
    return lw.mb.expand_dims(x=state, axes=[0])


def _order(rec: Recurrence, direction: str) -> list[int]:
    return list(range(rec.steps)) if direction == "forward" else list(range(rec.steps - 1, -1, -1))


def _lstm_direction(
    lw: Lowering, node: onnx.NodeProto, rec: Recurrence, x: Any, masks: list[Any], d: int, u: _Unroller
) -> tuple[list[Any], Any, Any]:
    h_size = rec.hidden
    weight, recur = _pick(lw, node, 1, d, 0), _pick(lw, node, 2, d, 0)
    bias = _pick(lw, node, 3, d, 0)
    bias = (
        None
        if bias is None
        else _add(lw, _rows(lw, bias, 0, 4 * h_size), _rows(lw, bias, 4 * h_size, 8 * h_size))
    )
    peephole = _pick(lw, node, 7, d, 0)
    p_in, p_out, p_forget = (
        (None, None, None)
        if peephole is None
        else (_rows(lw, peephole, k * h_size, (k + 1) * h_size) for k in range(3))
    )
    f, g, h = rec.functions[d]
    projected = u.project(x, weight, bias)
    hidden, cell = _const(_initial(lw, node, 5, rec, d), u), _const(_initial(lw, node, 6, rec, d), u)
    outputs: list[Any] = [None] * rec.steps
    for t in _order(rec, rec.directions[d]):
        pre = _add(lw, projected[t], u.recurrent(hidden, recur))
        i_pre, o_pre, f_pre, c_pre = u.split(pre, 4)
        i_gate = u.gate(f, _add(lw, i_pre, _mul(lw, _const(p_in, u), cell)))
        if rec.input_forget:
            f_gate = lw.mb.sub(x=np.ones((), u.dtype), y=i_gate)
        else:
            f_gate = u.gate(f, _add(lw, f_pre, _mul(lw, _const(p_forget, u), cell)))
        new_cell = _add(lw, _mul(lw, f_gate, cell), lw.mb.mul(x=i_gate, y=u.gate(g, c_pre)))
        o_gate = u.gate(f, _add(lw, o_pre, _mul(lw, _const(p_out, u), new_cell)))
        new_hidden = lw.mb.mul(x=o_gate, y=h.apply(lw, new_cell))
        outputs[t] = u.hold(masks[t], new_hidden, None)
        hidden, cell = u.hold(masks[t], new_hidden, hidden), u.hold(masks[t], new_cell, cell)
    return outputs, hidden, cell


def _const(value: Any, u: _Unroller) -> Any:
    return value.astype(u.dtype) if isinstance(value, np.ndarray) else value


def _gru_direction(
    lw: Lowering, node: onnx.NodeProto, rec: Recurrence, x: Any, masks: list[Any], d: int, u: _Unroller
) -> tuple[list[Any], Any, Any]:
    h_size = rec.hidden
    weight, recur = _pick(lw, node, 1, d, 0), _pick(lw, node, 2, d, 0)
    bias = _pick(lw, node, 3, d, 0)
    w_bias = _rows(lw, bias, 0, 3 * h_size)
    r_bias = _rows(lw, bias, 3 * h_size, 6 * h_size)
    # z and r take both biases outside any gate; h takes Rbh inside the reset where linear_before_reset
    zr_bias = _add(lw, _rows(lw, w_bias, 0, 2 * h_size), _rows(lw, r_bias, 0, 2 * h_size))
    rbh = _rows(lw, r_bias, 2 * h_size, 3 * h_size)
    h_bias = _rows(lw, w_bias, 2 * h_size, 3 * h_size)
    if not rec.linear_before_reset:
        h_bias = _add(lw, h_bias, rbh)
    zr_in = u.project(x, _rows(lw, weight, 0, 2 * h_size), zr_bias)
    h_in = u.project(x, _rows(lw, weight, 2 * h_size, 3 * h_size), h_bias)
    zr_recur, h_recur = _rows(lw, recur, 0, 2 * h_size), _rows(lw, recur, 2 * h_size, 3 * h_size)
    f, g = rec.functions[d]
    hidden = _const(_initial(lw, node, 5, rec, d), u)
    outputs: list[Any] = [None] * rec.steps
    for t in _order(rec, rec.directions[d]):
        z_pre, r_pre = u.split(_add(lw, zr_in[t], u.recurrent(hidden, zr_recur)), 2)
        update, reset = u.gate(f, z_pre), u.gate(f, r_pre)
        if rec.linear_before_reset:
            inner = _add(lw, u.recurrent(hidden, h_recur), _const(rbh, u))
            candidate_pre = _add(lw, h_in[t], _mul(lw, reset, inner))
        else:
            candidate_pre = _add(lw, h_in[t], u.recurrent(_mul(lw, reset, hidden), h_recur))
        candidate = u.gate(g, candidate_pre)
        keep = lw.mb.sub(x=np.ones((), u.dtype), y=update)
        new_hidden = _add(lw, lw.mb.mul(x=keep, y=candidate), _mul(lw, update, hidden))
        outputs[t] = u.hold(masks[t], new_hidden, None)
        hidden = u.hold(masks[t], new_hidden, hidden)
    return outputs, hidden, None


def _rnn_direction(
    lw: Lowering, node: onnx.NodeProto, rec: Recurrence, x: Any, masks: list[Any], d: int, u: _Unroller
) -> tuple[list[Any], Any, Any]:
    h_size = rec.hidden
    weight, recur = _pick(lw, node, 1, d, 0), _pick(lw, node, 2, d, 0)
    bias = _pick(lw, node, 3, d, 0)
    bias = None if bias is None else _add(lw, _rows(lw, bias, 0, h_size), _rows(lw, bias, h_size, 2 * h_size))
    projected = u.project(x, weight, bias)
    (f,) = rec.functions[d]
    hidden = _const(_initial(lw, node, 5, rec, d), u)
    outputs: list[Any] = [None] * rec.steps
    for t in _order(rec, rec.directions[d]):
        new_hidden = u.gate(f, _add(lw, projected[t], u.recurrent(hidden, recur)))
        outputs[t] = u.hold(masks[t], new_hidden, None)
        hidden = u.hold(masks[t], new_hidden, hidden)
    return outputs, hidden, None


_DIRECTION_BUILDERS = {"LSTM": _lstm_direction, "GRU": _gru_direction, "RNN": _rnn_direction}


def lower_recurrent(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    rec = read_recurrence(lw, node, DEFAULT_MAX_UNROLLED_STEPS)
    mb = lw.mb
    x = _input_sequence(lw, node, rec)
    dtype = lw.types.nptype_from_builtin(x.dtype)
    masks = _masks(lw, node, rec)
    unroller = _Unroller(lw, rec, dtype)
    sequences, finals, cells = [], [], []
    for d in range(len(rec.directions)):
        outputs, hidden, cell = _DIRECTION_BUILDERS[rec.op_type](lw, node, rec, x, masks, d, unroller)
        sequences.append(outputs)
        finals.append(hidden)
        cells.append(cell)
    wanted = [len(node.output) > i and node.output[i] != "" for i in range(3)]
    results: list[Any] = [None, None, None]
    if wanted[0]:
        # Y: [steps, directions, batch, hidden] (batch first: [batch, steps, directions, hidden])
        per_direction = [
            mb.expand_dims(x=steps[0] if len(steps) == 1 else mb.concat(values=steps, axis=0), axes=[1])
            for steps in sequences
        ]
        y = per_direction[0] if len(per_direction) == 1 else mb.concat(values=per_direction, axis=1)
        perm = [2, 0, 1, 3] if rec.batch_first else [0, 1, 2, 3]
        results[0] = mb.transpose(x=y, perm=perm, name=lw.name(node, 0))
    for index, states in ((1, finals), (2, cells)):
        if not wanted[index]:
            continue
        if any(state is None for state in states):
            raise NotLowerable(f"{node.op_type} output {index} of an empty sequence is not supported")
        stacked = states[0] if len(states) == 1 else mb.concat(values=states, axis=0)
        perm = [1, 0, 2] if rec.batch_first else [0, 1, 2]
        results[index] = mb.transpose(x=stacked, perm=perm, name=lw.name(node, index))
    return results[: len(node.output)]


RECURRENT_LOWERINGS: dict[str, LowerFn] = {
    "LSTM": lower_recurrent,
    "GRU": lower_recurrent,
    "RNN": lower_recurrent,
}
