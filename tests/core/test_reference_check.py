"""The reference check end to end on the host: `farm submit` of crafted models whose outputs are
inf, NaN, all-zero, near-zero, int64 class indices, bool masks and strings, and of an int8 QDQ
model from ONNX Runtime's quantiser, with and without `--reference` to its float model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ondevice_farm.errors import ReferenceCheckError

from . import numeric_models as models
from .conftest import farm, farm_json

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
FAST = ("--runs", "3", "--warmup", "0", "--no-profile")

pytestmark = pytest.mark.usefixtures("ray_session")


def submit(home: Path, model: Path, *args: str, expect: int = 0) -> dict[str, Any]:
    result = farm(home, "submit", str(model), *FAST, *args, "--json")
    assert result.exit_code == expect, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    return document


def only_reference(document: dict[str, Any]) -> dict[str, Any]:
    (job,) = document["jobs"]
    assert job["status"] == "ok"
    reference: dict[str, Any] = job["reference"]
    return reference


def test_an_inf_output_fails_the_run_completes_and_the_exit_code_says_so(home: Path, tmp_path: Path) -> None:
    """x * 1e5 through fp16 overflows as an fp16 backend does: a failed reference check, one line,
    exit 9, and the run complete and stored (not interrupted by an exception in the diff)."""
    overflow = models.fp16_overflow(tmp_path / "overflow.onnx")
    result = farm(home, "submit", str(overflow), *FAST)
    assert result.exit_code == ReferenceCheckError.exit_code == 9
    lines = result.stderr.strip().splitlines()
    head = "farm: error: reference check failed on host-cpu ort/cpu: y: non-finite values: "
    assert lines[-1].startswith(head)
    assert "the run is complete" in lines[-1] and "Traceback" not in result.stderr
    assert "reference check FAILED" in result.stdout and "FAIL" in result.stdout

    (run,) = farm_json(home, "runs")["runs"]
    assert run["status"] == "complete"
    shown = farm_json(home, "show", run["run_id"])
    jsonschema.validate(shown, SCHEMA)
    reference = only_reference(shown)
    assert reference["status"] == "failed" and reference["passed"] is False
    output = reference["outputs"]["y"]
    assert output["snr_db"] is None and output["cosine"] is None  # never a finite SNR
    # the model itself overflows on the host too: both sides are counted, separately
    assert output["nonfinite"]["actual"]["inf"] > 0
    assert output["nonfinite"]["reference"] == output["nonfinite"]["actual"]


def test_inf_on_the_device_against_a_finite_float_reference(home: Path, tmp_path: Path) -> None:
    overflow = models.fp16_overflow(tmp_path / "overflow.onnx")
    float_model = models.scaled(tmp_path / "scaled.onnx")
    document = submit(home, overflow, "--reference", str(float_model), expect=9)
    reference = only_reference(document)
    counts = reference["outputs"]["y"]["nonfinite"]
    assert counts["reference"] == {"nan": 0, "inf": 0} and counts["actual"]["inf"] > 0
    assert reference["reason"].startswith("y: non-finite values: ")
    assert reference["reason"].endswith(" on the device, 0 in the reference")
    assert reference["model"]["source"] == "--reference" and reference["model"]["name"] == "scaled"


def test_nan_outputs_fail_with_their_count(home: Path, tmp_path: Path) -> None:
    document = submit(home, models.square_root(tmp_path / "sqrt.onnx"), expect=9)
    output = only_reference(document)["outputs"]["y"]
    assert output["nonfinite"]["actual"]["nan"] > 0 and output["snr_db"] is None
    assert f"({output['nonfinite']['actual']['nan']} NaN)" in output["reason"].replace("0 inf, ", "")


def test_all_zero_and_tiny_outputs_pass_on_the_host(home: Path, tmp_path: Path) -> None:
    zero = only_reference(submit(home, models.scaled(tmp_path / "zero.onnx", 0.0)))
    assert zero["status"] == "passed" and zero["outputs"]["y"]["snr_db"] == 200.0
    tiny = only_reference(submit(home, models.scaled(tmp_path / "tiny.onnx", 1e-8)))
    assert tiny["status"] == "passed" and tiny["outputs"]["y"]["max_abs"] == 0.0


def test_a_near_zero_map_with_a_small_absolute_error_passes(home: Path, tmp_path: Path) -> None:
    """sigmoid(2x - 18) against the same plus 1.5e-7: SNR and cosine are poor on a signal of
    1e-8..1e-6, the absolute error is tiny, and the verdict follows the absolute error."""
    device = models.near_zero(tmp_path / "probs.onnx")
    reference_model = models.near_zero(tmp_path / "probs_ref.onnx", offset=1.5e-7)
    reference = only_reference(submit(home, device, "--reference", str(reference_model)))
    output = reference["outputs"]["y"]
    assert reference["status"] == "passed" and output["passed"] is True
    assert output["snr_db"] < reference["tolerance"]["snr_db_min"]
    assert output["max_abs"] == pytest.approx(1.5e-7, rel=0.05) and output["outside"] == 0


def test_an_off_by_one_class_index_fails(home: Path, tmp_path: Path) -> None:
    index = models.class_index(tmp_path / "argmax.onnx")
    same = only_reference(submit(home, index))
    assert same["status"] == "passed" and same["outputs"]["y"]["kind"] == "integer"
    shifted = models.class_index(tmp_path / "argmax_plus_one.onnx", off_by=1)
    result = farm(home, "submit", str(index), *FAST, "--reference", str(shifted))
    assert result.exit_code == 9
    assert "y: 1 of 1 values differ (exact match 0 %, needs 100 %), largest difference 1" in result.stderr


def test_bool_masks(home: Path, tmp_path: Path) -> None:
    mask = models.mask(tmp_path / "mask.onnx")
    assert only_reference(submit(home, mask))["outputs"]["y"]["exact_match"] == 1.0
    stricter = models.mask(tmp_path / "mask_0_5.onnx", threshold=0.5)
    failed = only_reference(submit(home, mask, "--reference", str(stricter), expect=9))
    output = failed["outputs"]["y"]
    assert output["kind"] == "bool" and 0 < output["mismatches"] < models.WIDTH
    # the same comparison, with the share of mismatches the run allows
    allowed = f"exact={1 - output['mismatches'] / models.WIDTH:g}"
    relaxed = submit(home, mask, "--reference", str(stricter), "--tolerance", allowed)
    assert only_reference(relaxed)["status"] == "passed"
    assert relaxed["settings"]["tolerance"] == [allowed]


def test_string_outputs(home: Path, tmp_path: Path) -> None:
    labels = models.label(tmp_path / "label.onnx", ["cat", "dog", "eel"])
    same = only_reference(submit(home, labels))
    assert same["status"] == "passed" and same["outputs"]["y"]["kind"] == "string"
    renamed = models.label(tmp_path / "label_fr.onnx", ["chat", "chien", "anguille"])
    failed = only_reference(submit(home, labels, "--reference", str(renamed), expect=9))
    assert failed["reason"] == "y: 1 of 1 strings differ (exact match 0 %, needs 100 %)"
    # the string reference is cached without pickles, and read back on the next run
    assert only_reference(submit(home, labels))["status"] == "passed"


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("cnn")
    float_model = models.small_cnn(folder / "cnn.onnx")
    return float_model, models.quantized(float_model, folder / "cnn_int8.onnx")


def test_a_qdq_model_is_judged_at_int8(home: Path, cnn: tuple[Path, Path]) -> None:
    _, int8 = cnn
    document = submit(home, int8)
    (job,) = document["jobs"]
    assert job["precision"] == "int8"
    reference = job["reference"]
    assert reference["status"] == "passed"
    assert (reference["tolerance"]["precision"], reference["tolerance"]["source"]) == ("int8", "default")
    assert reference["model"] == {
        "name": "cnn_int8",
        "sha256": document["model"]["sha256"],
        "path": str(int8),
        "source": "submitted model",
        "runtime": "onnxruntime CPUExecutionProvider, optimisations off",
    }
    assert reference["outputs"]["logits"]["topk"]["top1_match"] is True


def test_a_qdq_model_against_its_float_model(home: Path, cnn: tuple[Path, Path]) -> None:
    float_model, int8 = cnn
    document = submit(home, int8, "--reference", str(float_model))
    reference = only_reference(document)
    logits = reference["outputs"]["logits"]
    # quantisation noise, measured against the model the user started from
    assert reference["status"] == "passed" and 20 < logits["snr_db"] < 80
    assert reference["model"]["source"] == "--reference" and reference["model"]["name"] == "cnn"
    assert document["settings"]["reference_model"] == str(float_model)
    # the same numbers at the fp32 tolerance fail: the int8 default is what lets them through
    fp32 = "int8:atol=1e-5,rtol=1e-4,snr_db=80,cosine=0.99999"
    strict = submit(home, int8, "--reference", str(float_model), "--tolerance", fp32, expect=9)
    strict_reference = only_reference(strict)
    assert strict_reference["status"] == "failed" and strict_reference["tolerance"]["source"] == "--tolerance"
    assert strict_reference["outputs"]["logits"]["snr_db"] == pytest.approx(logits["snr_db"])


def test_a_reference_model_with_other_inputs_is_refused_before_anything_is_stored(
    home: Path, tmp_path: Path, cnn: tuple[Path, Path]
) -> None:
    float_model, _ = cnn
    result = farm(home, "submit", str(models.scaled(tmp_path / "s.onnx")), "--reference", str(float_model))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"farm: error: --reference {float_model}: it has no input 'x' (hint: see `farm --help`)"
    )
    store = home / "results.sqlite"
    if store.exists():
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
