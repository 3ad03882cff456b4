"""scripts/rename_packages.py on a copy of this tree: the names it gives, what it leaves alone
(directories, the command, protocol ids, helpers named `farm`), and that a second run changes
nothing. The lead runs it once everyone's work is merged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rename_packages.py"


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to copy its tracked files")
    copy = tmp_path_factory.mktemp("tree") / "repo"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        source = ROOT / os.fsdecode(name)
        if source.is_file() and not source.is_symlink():
            target = copy / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    shutil.copy2(SCRIPT, copy / "scripts" / "rename_packages.py")
    done = subprocess.run([sys.executable, str(copy / "scripts" / "rename_packages.py"), str(copy)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return copy


def test_second_run_changes_nothing(renamed: Path) -> None:
    again = subprocess.run([sys.executable, str(renamed / "scripts" / "rename_packages.py"), "--check",
                            str(renamed)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stdout


def test_names(renamed: Path) -> None:
    assert os.readlink(renamed / "ondevice_farm") == "farm"
    assert os.readlink(renamed / "ondevice_farm_agents") == "agents"
    pyproject = (renamed / "pyproject.toml").read_text()
    assert 'name = "ondevice-farm"' in pyproject
    assert 'farm = "ondevice_farm.cli.main:main"' in pyproject  # the command stays `farm`
    assert 'DISTRIBUTION = "ondevice-farm"' in (renamed / "farm" / "errors.py").read_text()
    assert "from ondevice_farm_agents.base import" in (renamed / "agents" / "registry.py").read_text()
    readme = (renamed / "README.md").read_text()
    assert "'ondevice-farm[coreml]'" in readme and "'farm[" not in readme


def test_left_alone(renamed: Path) -> None:
    # a protocol id shared with the Swift runner, a helper function called `farm`, paths, commands
    assert '"farm.ios.job/' in (renamed / "agents" / "ios" / "contract.py").read_text()
    assert "from .conftest import farm" in (renamed / "tests" / "core" / "test_compile_cli.py").read_text()
    assert "`farm/compile/coreml/`" in (renamed / "docs" / "report.md").read_text()
    assert "farm submit" in (renamed / "README.md").read_text()


def test_nothing_imports_the_old_names(renamed: Path) -> None:
    done = subprocess.run(
        ["grep", "-rnE", r"^\s*(from|import) (farm|agents)(\.| )", "--include=*.py", "."],
        cwd=renamed, capture_output=True, text=True,
    )  # fmt: skip
    assert done.stdout == ""
