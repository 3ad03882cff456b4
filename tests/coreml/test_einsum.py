"""Einsum rewritten to transposes, reductions and batched matmuls: the fp32 program matches ONNX
Runtime for the equations models carry, and an equation it cannot take is refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import assert_fp32_matches, random_feeds, save
from tests.coreml.onnx_models import f32, single_op

pytest.importorskip("coremltools")

#: equation -> operand shapes (the last operand a constant where marked with "const")
EQUATIONS: dict[str, list[Any]] = {
    "ij->ji": [[3, 4]],
    "ij->i": [[3, 4]],
    "ij->": [[3, 4]],
    "...ii->...i": [[2, 3, 3]],
    "ii": [[4, 4]],
    "i,i": [[5], [5]],
    "i,j->ij": [[3], [4]],
    "bij,bjk->bik": [[2, 3, 4], [2, 4, 5]],
    "ij,jk": [[3, 4], [4, 5]],
    "bhqd,bhkd->bhqk": [[1, 2, 3, 4], [1, 2, 5, 4]],
    "...ij,jk->...ik": [[2, 3, 3, 4], "const"],
    "ij,jk,kl->il": [[2, 3], [3, 4], [4, 5]],
    "bid,bjd->bij": [[2, 3, 4], [1, 5, 4]],
    "abc,cd->abd": [[2, 3, 4], [4, 2]],
    "ijk->kji": [[2, 3, 4]],
    "nchw,nhwk->nck": [[1, 2, 3, 4], [1, 3, 4, 5]],
}


@pytest.mark.parametrize("equation", sorted(EQUATIONS))
def test_einsum_matches_onnxruntime_in_fp32(equation: str, tmp_path: Path) -> None:
    shapes = [s for s in EQUATIONS[equation] if s != "const"]
    consts = [f32(4, 5, seed=9)] if "const" in EQUATIONS[equation] else None
    model = single_op("Einsum", shapes, consts, opset=12, equation=equation)
    assert_fp32_matches(save(model, tmp_path), random_feeds(model))


def test_a_free_dim_is_refused_in_one_line(tmp_path: Path) -> None:
    model = single_op("Einsum", [["n", 3, 4], ["n", 4, 5]], opset=12, equation="bij,bjk->bik")
    with pytest.raises(CompileError, match="Einsum needs static input shapes"):
        predict_drift(save(model, tmp_path), random_feeds(model, batch=2), precision="fp32")
