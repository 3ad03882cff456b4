"""The installed versions of a compiler's packages, without importing them: what a compile report
names (`converter_versions`) and what a compile cache is keyed by."""

from __future__ import annotations

from importlib import metadata


def package_versions(*names: str) -> dict[str, str]:
    """distribution -> its version, "none" where it is not installed."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "none"
    return versions
