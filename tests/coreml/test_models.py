"""Whole real-architecture models: convert, save, reload, fp32 against ONNX Runtime, fp16 drift."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from ondevice_farm.analysis.numeric import diff_output
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.harness import assert_fp32_matches, random_feeds, save
from tests.coreml.onnx_models import conv1d_upsampler, mobilenet_block_stack, transformer_encoder

ct = pytest.importorskip("coremltools")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _feeds(model: onnx.ModelProto, batch: int = 1) -> dict[str, np.ndarray]:
    if model.graph.input[0].name == "input_ids":
        seq = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
        return {"input_ids": np.random.default_rng(3).integers(0, 50, (batch, seq)).astype(np.int64)}
    return random_feeds(model, batch=batch)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mobilenet_v2_blocks": mobilenet_block_stack,
    "transformer_encoder": transformer_encoder,
    "conv1d_upsampler": conv1d_upsampler,
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_converts_reloads_matches_and_predicts_drift(name: str, tmp_path: Path) -> None:
    model = MODELS[name]()
    path = save(model, tmp_path)
    artifact = compile_coreml(path, Target.parse("coreml/ane"), tmp_path / "out")

    assert artifact.path == tmp_path / "out" / "model.mlpackage"
    reloaded = ct.models.MLModel(str(artifact.path), skip_model_load=True)
    spec = reloaded.get_spec()
    assert [i.name for i in spec.description.input] == [i.name for i in model.graph.input]
    assert [o.name for o in spec.description.output] == [o.name for o in model.graph.output]
    assert artifact.report.nodes_before == len(model.graph.node)
    assert artifact.report.precision == "fp16"

    feeds = _feeds(model)
    reference = assert_fp32_matches(path, feeds)
    predicted = predict_drift(path, feeds, precision="fp16")
    for out_name, ref in reference.items():
        drift = diff_output(ref, predicted[out_name])
        # fp16 storage moves the outputs, but by the ~3 decimal digits fp16 holds, not more
        assert drift.max_abs > 0.0
        assert drift.snr_db > 35.0, f"{name}/{out_name}: predicted SNR {drift.snr_db:.1f} dB"


def test_example_tinynet_with_a_dynamic_batch(tmp_path: Path) -> None:
    path = EXAMPLES / "tinynet.onnx"
    model = onnx.load(str(path))
    artifact = compile_coreml(path, Target.parse("coreml/all"), tmp_path)
    image = artifact.report.extra["inputs"][0]
    assert image["shape_ranges"][0][0] == 1 and image["shape_ranges"][0][1] > 1
    assert_fp32_matches(path, random_feeds(model, batch=3))


@pytest.mark.parametrize("factory", [mobilenet_block_stack, transformer_encoder], ids=["cnn", "encoder"])
def test_free_batch_dim_stays_flexible_and_runs_at_any_batch(
    factory: Callable[..., onnx.ModelProto], tmp_path: Path
) -> None:
    model = factory(batch="N")
    path = save(model, tmp_path)
    artifact = compile_coreml(path, Target.parse("coreml/gpu"), tmp_path / "out")
    assert artifact.report.extra["inputs"][0]["shape_ranges"][0] == (1, 4096)
    for batch in (1, 3):
        assert_fp32_matches(path, _feeds(model, batch=batch))


def test_input_shapes_fix_a_free_dim(tmp_path: Path) -> None:
    model = mobilenet_block_stack(batch="N")
    path = save(model, tmp_path)
    artifact = compile_coreml(
        path, Target.parse("coreml/cpu"), tmp_path / "out", input_shapes={"image": (2, 3, 32, 32)}
    )
    assert artifact.report.extra["inputs"][0]["shape"] == [2, 3, 32, 32]
    assert "shape_ranges" not in artifact.report.extra["inputs"][0]
    out = predict_drift(
        path, random_feeds(model, batch=2), precision="fp32", input_shapes={"image": (2, 3, 32, 32)}
    )
    assert next(iter(out.values())).shape == (2, 10)
