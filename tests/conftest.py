"""Shared test set-up: device-marked tests are skipped unless asked for; Ray stays quiet."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """A new, empty results store on each backend: a SQLite file, a database on a real PostgreSQL
    (a module that asks for it imports `postgres` from tests.pg_server)."""
    if request.param == "sqlite":
        return tmp_path / "r.sqlite"
    url: str = request.getfixturevalue("postgres").new_database()
    return url
