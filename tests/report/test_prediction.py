"""The host fp16 prediction behind the reduced_precision finding, computed for real on tinynet."""

from __future__ import annotations

import pytest

from ondevice_farm.reports.document import build_report
from ondevice_farm.reports.prediction import predicted_snr_db
from tests.report.conftest import TINYNET
from tests.report.crafted import job, run

pytest.importorskip("coremltools")


def test_fp16_prediction_lands_where_fp16_rounding_does() -> None:
    document = {"run_id": "p", "model": {"name": "tinynet"}, "settings": {"seed": 0}, "jobs": []}
    [(name, snr)] = predicted_snr_db(TINYNET, document, "fp16").items()
    # fp16 keeps 11 significant bits: one rounding is ~66 dB; a 20-conv network loses some of that
    assert name == "probabilities" and 40.0 < snr < 80.0
    assert predicted_snr_db(TINYNET, document, "int8") == {}


def test_report_puts_the_prediction_beside_an_fp16_job() -> None:
    fp16 = job("iphone15", "coreml/ane", precision="fp16", snr_db=57.0)
    fp16["reference"]["outputs"] = {"probabilities": fp16["reference"]["outputs"].pop("logits")}
    report = build_report(run(fp16), model_path=TINYNET).to_dict()
    predicted = report["predicted_snr_db"]["fp16"]["probabilities"]
    [finding] = [f for f in report["findings"] if f["rule"] == "reduced_precision"]
    assert finding["evidence"]["predicted_snr_db"] == predicted
