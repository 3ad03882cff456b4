"""scripts/test touches nothing it did not start: no kills by name, no service stops, and the
temporary policy-rc.d that keeps package installs from starting daemons is always put back."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test"


def test_no_kill_or_service_stop() -> None:
    code = [line for line in SCRIPT.read_text().splitlines() if not line.lstrip().startswith("#")]
    offending = [line for line in code if re.search(r"\b(pkill|killall|kill|systemctl|service)\b", line)]
    assert offending == []


def test_runs_pytest_with_durations() -> None:
    assert "--durations=15" in SCRIPT.read_text()


def _fake_tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run_install(tmp_path: Path, apt_exit: int, previous_policy: str | None) -> tuple[Path, Path]:
    """scripts/test in a copy of the repository layout, with fake dpkg-query/apt-get on PATH:
    every package looks missing, apt-get records what policy-rc.d said while it ran; the run
    stops right after the install (no python to make a venv with)."""
    if os.geteuid() != 0:
        pytest.skip("the install path runs only as root")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts" / "test")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    policy = tmp_path / "policy-rc.d"
    if previous_policy is not None:
        policy.write_text(previous_policy)
    seen = tmp_path / "seen"
    _fake_tool(bin_dir, "dpkg-query", "exit 1")
    _fake_tool(
        bin_dir,
        "apt-get",
        f'[ "$1" = update ] && exit 0\n"{policy}" start prometheus; echo "policy $?" >> "{seen}"\n'
        f'echo "args $*" >> "{seen}"\nexit {apt_exit}',
    )
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "POLICY_RC_D": str(policy),
        "PYTHON": "/bin/false",
        "HOME": str(tmp_path),
    }
    subprocess.run(["bash", str(repo / "scripts" / "test")], env=env, capture_output=True, timeout=60)
    return policy, seen


def test_daemons_not_started_during_install_and_policy_removed(tmp_path: Path) -> None:
    policy, seen = _run_install(tmp_path, apt_exit=0, previous_policy=None)
    lines = seen.read_text().splitlines()
    assert "policy 101" in lines
    args = next(line for line in lines if line.startswith("args "))
    assert "--no-install-recommends" in args
    for package in ("prometheus-pushgateway", "postgresql", "g++-aarch64-linux-gnu", "qemu-user", "cmake"):
        assert package in args.split()
    assert not policy.exists()


def test_previous_policy_restored_when_the_install_fails(tmp_path: Path) -> None:
    before = "#!/bin/sh\n# the lab's own policy\nexit 0\n"
    policy, seen = _run_install(tmp_path, apt_exit=100, previous_policy=before)
    assert "policy 101" in seen.read_text().splitlines()
    assert policy.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("policy-rc.d.")] == []


def test_no_loopback_namespace_fails_before_installing(tmp_path: Path) -> None:
    """Without the namespace the Ray tests would skip and pytest pass: the script must fail."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts" / "test")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen"
    _fake_tool(bin_dir, "unshare", "exit 1")
    for tool in ("dpkg-query", "apt-get"):
        _fake_tool(bin_dir, tool, f'echo "{tool}" >> "{seen}"; exit 0')
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHON": "/bin/false", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "test")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "loopback-only network namespace" in done.stderr
    assert not seen.exists()
