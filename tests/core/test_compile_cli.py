from __future__ import annotations

from pathlib import Path

from .conftest import farm, farm_json


def test_compile_reports_per_target_without_a_device(home: Path, model: Path) -> None:
    document = farm_json(home, "compile", str(model), "--targets", "ort/cpu,ort/nnapi")
    reports = {t["target"]: t["report"] for t in document["targets"]}
    assert reports["ort/cpu"]["nodes_after"] < reports["ort/cpu"]["nodes_before"]
    assert reports["ort/cpu"]["placement"] == {"CPUExecutionProvider": 41}
    assert reports["ort/nnapi"]["placement"] == {}
    assert Path(document["targets"][0]["artifact"]).exists()


def test_compile_table(home: Path, model: Path) -> None:
    result = farm(home, "compile", str(model), "--targets", "ort/cpu")
    assert result.exit_code == 0, result.stderr
    assert "61 nodes ->" in result.stdout and "BatchNormalization 20->0" in result.stdout
