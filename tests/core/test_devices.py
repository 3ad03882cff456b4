from __future__ import annotations

from pathlib import Path

from .conftest import farm, farm_json


def test_devices_lists_profiles_and_the_host_unit(home: Path) -> None:
    document = farm_json(home, "devices")
    profiles = {p["name"]: p for p in document["profiles"]}
    assert profiles["host-cpu"]["attached"] == 1
    assert profiles["pixel8"]["attached"] == 0  # no phone on this machine
    assert "ort/nnapi" in profiles["pixel8"]["targets"]
    host_units = [u for u in document["units"] if u["profile"] == "host-cpu"]
    assert len(host_units) == 1 and host_units[0]["properties"]["onnxruntime"]


def test_devices_table(home: Path) -> None:
    result = farm(home, "devices")
    assert result.exit_code == 0, result.stderr
    assert "host-cpu" in result.stdout and "galaxy-s24" in result.stdout
