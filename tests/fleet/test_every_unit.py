"""`pixel8:*`: a job on every unit of a profile that is up, and a suite's say on whether a lost
unit's jobs move (`units_interchangeable`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.controller.selection import DeviceSelector, needs_units, parse_devices
from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.run import requests_for
from ondevice_farm.nightly.suite import load_suite
from ondevice_farm.profiles import load_profiles

PROFILES = load_profiles()
UP = {"pixel8": ["B", "A"], "host-cpu": ["h1"]}


def test_every_unit_of_a_profile_is_one_pinned_selector_per_unit_up() -> None:
    assert parse_devices("pixel8:*,host-cpu", PROFILES, UP) == [
        DeviceSelector("pixel8", "A"),
        DeviceSelector("pixel8", "B"),
        DeviceSelector("host-cpu"),
    ]
    # a unit named twice is one job, not two
    assert parse_devices("pixel8:A,pixel8:*", PROFILES, UP) == [
        DeviceSelector("pixel8", "A"),
        DeviceSelector("pixel8", "B"),
    ]


def test_every_unit_needs_the_units_up_and_one_of_them() -> None:
    assert needs_units("pixel8:*") and needs_units("host-cpu, pixel8:*") and needs_units("all")
    assert not needs_units("pixel8:A,host-cpu")
    with pytest.raises(UsageError, match=r"pixel8:\*: no unit of pixel8 is up"):
        parse_devices("pixel8:*", PROFILES, {"host-cpu": ["h1"]})
    with pytest.raises(UsageError, match="can only be read against the units up"):
        parse_devices("pixel8:*", PROFILES, None)
    with pytest.raises(UsageError, match="unknown device 'pixel9'"):
        parse_devices("pixel9:*", PROFILES, UP)


def write_suite(path: Path, *extra: str) -> Path:
    (path.parent / "m.onnx").write_bytes(b"")
    path.write_text(
        "\n".join(["name: s", "devices: ['pixel8:*']", *extra, "models:", "  - path: m.onnx"]) + "\n"
    )
    return path


def test_a_suite_says_whether_a_lost_units_jobs_move(tmp_path: Path) -> None:
    fixed = load_suite(write_suite(tmp_path / "fixed.yaml"))
    moving = load_suite(write_suite(tmp_path / "moving.yaml", "units_interchangeable: true"))
    assert [r.units_interchangeable for r in requests_for(fixed)] == [False]
    assert [r.units_interchangeable for r in requests_for(moving)] == [True]
    assert requests_for(moving)[0].devices == "pixel8:*"
    with pytest.raises(UsageError, match="units_interchangeable must be true or false"):
        load_suite(write_suite(tmp_path / "bad.yaml", "units_interchangeable: sometimes"))
