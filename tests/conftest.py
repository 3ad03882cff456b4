"""Shared test set-up: device-marked tests are skipped unless asked for; Ray stays quiet; the
heaviest files are collected first."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-device", action="store_true", help="run tests that need a physical phone")


#: files that each take a minute or more of a worker (scripts/test's --durations), collected first:
#: pytest-xdist hands whole files out in collection order, and these, alphabetically late, made a
#: tail of one busy worker beside an idle one. An ordering hint only: a file not here runs as before.
HEAVY_FIRST = (
    "tests/runtimes/",
    "tests/torch_source/",
    "tests/newcomer/test_readme_tour.py",
    "tests/android/test_edge_over_adb.py",
    "tests/report/test_divergence.py",
    "tests/generate/",
)


def _heaviness(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, prefix in enumerate(HEAVY_FIRST) if path.startswith(prefix)), len(HEAVY_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_heaviness)  # stable: every file keeps its tests' order, and stays in one piece
    if config.getoption("--run-device"):
        return
    skip = pytest.mark.skip(reason="needs a physical device: run with --run-device on a lab host")
    for item in items:
        if "device" in item.keywords:
            item.add_marker(skip)
