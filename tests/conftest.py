"""Shared test set-up: device-marked tests are skipped unless asked for; Ray stays quiet."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-device", action="store_true", help="run tests that need a physical phone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-device"):
        return
    skip = pytest.mark.skip(reason="needs a physical device: run with --run-device on a lab host")
    for item in items:
        if "device" in item.keywords:
            item.add_marker(skip)
