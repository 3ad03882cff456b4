"""The CoreML lowering's refusal of a Conv over a dynamic length the farm sized at 1 (what a
voice-activity model's STFT gave: "MIL rejected it: spatial dimension 0 has invalid output size
-1") names the input, its dynamic dims and the --shape that pins them; pinned, it compiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ondevice_farm.errors import CompileError
from tests.core.conftest import farm
from tests.core.dynamic_dim_models import LONG, frames

pytest.importorskip("coremltools")


def test_a_conv_over_an_unpinned_length_says_the_dims_and_the_shape_to_pin(
    tmp_path: Path,
) -> None:
    model = frames(tmp_path / "frames.onnx")
    home = tmp_path / "home"

    refused = farm(home, "compile", str(model), "-t", "coreml/ane", "--json")

    assert refused.exit_code == CompileError.exit_code
    [entry] = json.loads(refused.stdout)["targets"]
    lines = entry["error"].splitlines()
    assert "MIL rejected it" in lines[1]  # the lowering's own line, kept
    assert lines[-1] == (
        "  dynamic dims that no --shape pinned: x[batch, sequence], set to 1 by the farm (x=1x1); "
        "pin them at the sizes the model takes: --shape x=BATCHxSEQUENCE"
    )
    assert entry["hint"]  # the lowering's own hint stays

    pinned = farm(home, "compile", str(model), "-t", "coreml/ane", "--json", "--shape", f"x=1x{LONG}")

    assert pinned.exit_code == 0, pinned.stdout
    [entry] = json.loads(pinned.stdout)["targets"]
    assert "error" not in entry
