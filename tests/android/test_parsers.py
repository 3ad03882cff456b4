"""Parsers on recorded real outputs (fixtures/README.md says where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.profiles import load_profiles
from ondevice_farm_agents.android.inventory import make_unit, parse_getprop
from ondevice_farm_agents.android.perf_test import parse_output
from ondevice_farm_agents.android.thermal import parse_battery, parse_thermalservice, with_battery

FIXTURES = Path(__file__).parent / "fixtures"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_perf_test_output_with_statistics_from_an_android_phone() -> None:
    summary = parse_output(_read("perf_test/android_vivo_x300_sme2_resnet50v2.txt"))
    assert summary.session_creation_ms == pytest.approx(217.932)
    assert summary.first_inference_ms == pytest.approx(196.0)
    assert summary.average_ms == pytest.approx(98.961997)
    assert summary.requests == 5
    assert summary.peak_working_set_bytes == 271122432
    assert summary.avg_cpu_percent == 11
    assert summary.latency_ms == pytest.approx(
        {
            "min": 95.8204,
            "max": 101.519,
            "p50": 99.5086,
            "p90": 101.519,
            "p95": 101.519,
            "p99": 101.519,
            "p999": 101.519,
        }
    )


def test_perf_test_output_of_an_older_release_without_first_inference_or_statistics() -> None:
    summary = parse_output(_read("perf_test/android_acl_squeezenet_ort1.3.1.txt"))
    assert summary.session_creation_ms == pytest.approx(127.918)
    assert summary.average_ms == pytest.approx(144.871)
    assert summary.first_inference_ms is None and summary.latency_ms == {}
    assert summary.peak_working_set_bytes == 158171136


def test_perf_test_output_of_the_2020_format_without_spaces_after_colons() -> None:
    summary = parse_output(_read("perf_test/windows_resnet50_2020.txt"))
    assert summary.session_creation_ms == pytest.approx(1841.49)
    assert summary.average_ms == pytest.approx(734.606)
    assert summary.requests == 1 and summary.peak_working_set_bytes is None


def test_thermalservice_prefers_the_hal_readings_over_the_cache() -> None:
    thermal = parse_thermalservice(_read("dumpsys/thermalservice_pixel_memfault.txt"))
    assert thermal.status == "none"
    assert len(thermal.temperatures_c) == 13
    assert thermal.temperatures_c["cpu0-gold-usr"] == pytest.approx(31.7)  # HAL, not the cached 54.6
    assert thermal.temperatures_c["maxfg"] == pytest.approx(25.900002)
    assert "battery" not in thermal.temperatures_c  # cooling devices are not temperatures


def test_thermalservice_without_hal_readings_falls_back_to_the_cache() -> None:
    thermal = parse_thermalservice(_read("dumpsys/thermalservice_shield_tv_head.txt"))
    assert thermal.status == "none"
    assert thermal.temperatures_c == {"GPU": 36.0, "CPU0": 37.0, "CPU1": 37.0, "CPU2": 37.0, "CPU3": 37.0}


def test_battery_level_and_temperature() -> None:
    text = _read("dumpsys/battery_usb_full.txt")
    assert parse_battery(text)["USB powered"] == "true"
    thermal = with_battery(parse_thermalservice(""), text)
    assert thermal.battery_pct == 100.0
    assert thermal.temperatures_c == {"battery": 27.4}


def test_getprop_listing_and_an_unmatched_unit_gets_a_hint() -> None:
    props = parse_getprop(_read("getprop/msm8916_android_4.4.4.txt"))
    assert props["ro.board.platform"] == "msm8916"
    assert props["ro.build.version.sdk"] == "19"
    assert props["ro.build.date"] == "2024年 01月 09日 星期二 17:27:20 CST"
    unit = make_unit("usb:13a06a2a", props, load_profiles())
    assert unit.profile == "" and unit.platform == "android"
    assert unit.properties["ro.product.cpu.abi"] == "armeabi-v7a"
    assert "device_profiles/msm8916-32-512.yaml" in unit.properties["hint"]
    assert "ro.product.model: 'msm8916_32_512'" in unit.properties["hint"]
