"""Does this environment hold exactly the versions of a lock file (requirements/ci.txt)?

    python scripts/lock_check.py [requirements/ci.txt]

Prints one line and exits 0 when every locked package is installed at its locked version, else
lists each difference and exits 1: a test run then says which program it tested (scripts/test)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def locked_versions(lock: Path) -> dict[str, str]:
    """name -> exact version, from a pip-compile style file of `name==version` lines."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        (spec,) = requirement.specifier
        if spec.operator != "==":
            raise ValueError(f"{lock}: {text!r} is not an exact pin")
        pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def installed_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        found.setdefault(canonicalize_name(dist.metadata["Name"]), dist.version)
    return found


def differences(pins: dict[str, str], installed: dict[str, str]) -> list[str]:
    return [
        f"{name}: locked {version}, installed {installed.get(name, 'nothing')}"
        for name, version in sorted(pins.items())
        if installed.get(name) != version
    ]


def main(argv: list[str]) -> int:
    lock = Path(argv[0] if argv else "requirements/ci.txt")
    pins = locked_versions(lock)
    wrong = differences(pins, installed_versions())
    if wrong:
        print(f"error: this environment is not {lock}:", *wrong, sep="\n  ", file=sys.stderr)
        return 1
    print(f"environment matches {lock}: {len(pins)} packages at their locked versions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
