"""LSTM, GRU and RNN unrolled into MIL: the fp32 program matches ONNX Runtime in every direction,
layout and option ONNX gives them (ONNX's reference implementation ignores activations, clip and
sequence_lens, so ONNX Runtime is the oracle here; ONNX Runtime refuses layout=1, so batch-first
cases, which use neither, are checked against the reference)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import (
    FP32_RELATIVE_TOLERANCE,
    assert_fp32_matches,
    random_feeds,
    relative_error,
    save,
)
from tests.coreml.onnx_models import Graph, f32

pytest.importorskip("coremltools")

SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _recurrent(
    op_type: str,
    *,
    direction: str = "forward",
    layout: int = 0,
    bias: bool = True,
    initial: bool = False,
    peephole: bool = False,
    lengths: np.ndarray | None = None,
    weights_as_inputs: bool = False,
    outputs: tuple[int, ...] = (0, 1),
    seq: object = SEQ,
    **attrs: Any,
) -> onnx.ModelProto:
    g = Graph(opset=14)
    dirs = 2 if direction == "bidirectional" else 1
    rows = GATES[op_type] * HIDDEN
    x = g.input("x", [BATCH, seq, INPUT] if layout else [seq, BATCH, INPUT])
    w_value, r_value = f32(dirs, rows, INPUT, seed=1, scale=0.5), f32(dirs, rows, HIDDEN, seed=2, scale=0.5)
    if weights_as_inputs:
        w, r = g.input("w", list(w_value.shape)), g.input("r", list(r_value.shape))
    else:
        w, r = g.const(w_value), g.const(r_value)
    state_shape = [BATCH, dirs, HIDDEN] if layout else [dirs, BATCH, HIDDEN]
    inputs = [
        x,
        w,
        r,
        g.const(f32(dirs, 2 * rows, seed=3, scale=0.3)) if bias else "",
        g.const(lengths.astype(np.int32)) if lengths is not None else "",
        g.input("h0", state_shape) if initial else "",
    ]
    if op_type == "LSTM":
        inputs += [
            g.input("c0", state_shape) if initial else "",
            g.const(f32(dirs, 3 * HIDDEN, seed=4)) if peephole else "",
        ]
    while inputs[-1] == "":
        inputs.pop()
    names = g.op(
        op_type,
        inputs,
        n_out=3 if op_type == "LSTM" else 2,
        hidden_size=HIDDEN,
        direction=direction,
        layout=layout,
        **attrs,
    )
    node = g.nodes[-1]
    for i in range(len(node.output)):
        if i not in outputs:
            node.output[i] = ""
    for i in outputs:
        g.output(names[i])
    return g.model()


CASES: dict[str, Callable[[], onnx.ModelProto]] = {
    "lstm_defaults": lambda: _recurrent("LSTM", bias=False),
    "lstm_bidirectional_all_inputs": lambda: _recurrent(
        "LSTM", direction="bidirectional", initial=True, peephole=True, outputs=(0, 1, 2)
    ),
    "lstm_reverse_batch_first": lambda: _recurrent(
        "LSTM", direction="reverse", layout=1, initial=True, outputs=(0, 1, 2)
    ),
    "lstm_sequence_lens": lambda: _recurrent(
        "LSTM", direction="bidirectional", lengths=np.array([5, 2, 4]), outputs=(0, 1, 2)
    ),
    "lstm_clip_input_forget": lambda: _recurrent(
        "LSTM", clip=0.7, input_forget=1, initial=True, outputs=(0, 1, 2)
    ),
    "lstm_activations": lambda: _recurrent(
        "LSTM",
        activations=["HardSigmoid", "LeakyRelu", "Softsign"],
        activation_alpha=[0.3, 0.05],
        activation_beta=[0.4],
    ),
    "lstm_weights_as_inputs": lambda: _recurrent("LSTM", weights_as_inputs=True, initial=True),
    "gru_defaults": lambda: _recurrent("GRU", bias=False, outputs=(1,)),
    "gru_linear_before_reset": lambda: _recurrent("GRU", linear_before_reset=1, initial=True),
    "gru_bidirectional_batch_first": lambda: _recurrent("GRU", direction="bidirectional", layout=1),
    "gru_sequence_lens_reverse": lambda: _recurrent("GRU", direction="reverse", lengths=np.array([1, 5, 3])),
    "gru_activations_clip": lambda: _recurrent(
        "GRU", activations=["Sigmoid", "Elu"], activation_alpha=[0.5], clip=1.5, linear_before_reset=1
    ),
    "rnn_defaults": lambda: _recurrent("RNN", bias=False),
    "rnn_bidirectional_initial": lambda: _recurrent("RNN", direction="bidirectional", initial=True),
    "rnn_relu_weights_as_inputs": lambda: _recurrent("RNN", activations=["Relu"], weights_as_inputs=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_matches_its_oracle_in_fp32(case: str, tmp_path: Path) -> None:
    model = CASES[case]()
    path, feeds = save(model, tmp_path), random_feeds(model)
    if "batch_first" not in case:
        assert_fp32_matches(path, feeds)
        return
    names = [o.name for o in model.graph.output]
    reference = dict(zip(names, ReferenceEvaluator(model).run(None, feeds), strict=True))
    predicted = predict_drift(path, feeds, precision="fp32")
    for name, expected in reference.items():
        assert relative_error(expected, predicted[name]) <= FP32_RELATIVE_TOLERANCE, name


def test_a_free_sequence_length_is_refused_by_name(tmp_path: Path) -> None:
    model = _recurrent("LSTM", seq="time")
    feeds = random_feeds(model, batch=SEQ)
    with pytest.raises(CompileError, match="sequence length must be static"):
        predict_drift(save(model, tmp_path), feeds, precision="fp32")


def test_fp16_keeps_an_lstm_close(tmp_path: Path) -> None:
    model = _recurrent("LSTM", direction="bidirectional", initial=True)
    path = save(model, tmp_path)
    feeds = random_feeds(model)
    reference = predict_drift(path, feeds, precision="fp32")
    half = predict_drift(path, feeds, precision="fp16")
    for name, value in reference.items():
        assert value.dtype == np.float32 and half[name].shape == value.shape
        assert np.max(np.abs(half[name] - value)) < 1e-2, name
