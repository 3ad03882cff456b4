"""requirements/ci.txt, the exact versions CI installs: it pins every requirement pyproject.toml
names for the extras scripts/test installs, inside that requirement's range, and the check that
scripts/test runs after its install tells a matching environment from a drifted one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "ci.txt"
CHECK = ROOT / "scripts" / "lock_check.py"
#: the extras scripts/test installs, as scripts/lock resolves them
CI_EXTRAS = ("dev", "android", "ios", "coreml", "torch", "postgres", "executorch", "genai", "litert")


def _locked() -> dict[str, str]:
    sys.path.insert(0, str(CHECK.parent))
    try:
        from lock_check import locked_versions
    finally:
        sys.path.pop(0)
    return locked_versions(LOCK)


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in CI_EXTRAS:
        names += project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


def test_every_declared_requirement_is_pinned_inside_its_range() -> None:
    pins = _locked()
    outside = []
    for requirement in _declared():
        name = canonicalize_name(requirement.name)
        version = pins.get(name)
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            outside.append(f"{requirement} (locked: {version})")
    assert outside == [], "pyproject.toml changed without scripts/lock: " + ", ".join(outside)


def test_scripts_test_installs_the_lock_and_checks_it() -> None:
    script = (ROOT / "scripts" / "test").read_text()
    assert "pip install -q --no-deps -r requirements/ci.txt" in script
    assert "scripts/lock_check.py requirements/ci.txt" in script


def _check(lock: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), str(lock)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_check_tells_a_drifted_environment(tmp_path: Path) -> None:
    from importlib import metadata

    numpy = metadata.version("numpy")
    lock = tmp_path / "ci.txt"
    lock.write_text(f"numpy=={numpy}\n    # via ondevice-farm\nrequests-unheard-of==1.0\n")
    drifted = _check(lock)
    assert drifted.returncode == 1
    assert "requests-unheard-of: locked 1.0, installed nothing" in drifted.stderr
    assert "numpy" not in drifted.stderr
    lock.write_text(f"numpy=={numpy}\n")
    matching = _check(lock)
    assert matching.returncode == 0, matching.stderr
    assert "1 packages at their locked versions" in matching.stdout


def test_the_docs_name_the_locked_versions() -> None:
    """docs/testing.md's table of the versions this release was tested with is the lock's."""
    pins = _locked()
    rows = [
        line.strip("|").split("|")
        for line in (ROOT / "docs" / "testing.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| package")
    ]
    table = {canonicalize_name(name.strip()): version.strip() for name, version in rows}
    assert len(table) >= 10
    assert {name: pins.get(name) for name in table} == table
