"""The installed farm's version: what `farm serve` records and what a controller's fleet reports."""

from __future__ import annotations

from ondevice_farm.errors import DISTRIBUTION


def farm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a tree that was never installed
        return "unknown"
