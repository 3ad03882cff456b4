"""The README's tour runs as written: its commands are read from the README itself, so the two
cannot drift apart. Commands that need a lab are named here with why; they are still parsed by
the CLI, so an option the tour uses and the command lacks fails here too."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ondevice_farm.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

#: tour commands that cannot run on a bare host, by subcommand, and why
NEEDS_A_LAB = {
    "serve": "runs until stopped: the controller of a lab",
    "agent": "joins the Ray cluster head at HEAD:6379: needs a fleet",
}
TOUR_TIMEOUT_S = 240


def tour_commands() -> list[list[str]]:
    """The command lines of the first code block under `## A short tour`, comments dropped."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## A short tour", 1)[1]
    match = re.search(r"^```\n(.*?)^```", section, flags=re.S | re.M)
    assert match, "no code block under '## A short tour'"
    commands = [shlex.split(line, comments=True) for line in match.group(1).splitlines()]
    return [c for c in commands if c]


def test_the_tour_is_farm_commands() -> None:
    commands = tour_commands()
    assert len(commands) >= 8
    assert all(c[0] == "farm" for c in commands), [c for c in commands if c[0] != "farm"]
    assert {c[1] for c in commands} >= set(NEEDS_A_LAB)
    assert any("--address" in c for c in commands if c[1] == "submit")  # the fast path is shown


@pytest.mark.parametrize("command", tour_commands(), ids=lambda c: " ".join(c[1:3]))
def test_every_tour_command_parses(command: list[str]) -> None:
    """Options and arguments as the CLI takes them (e.g. `farm check -t`), without running anything."""
    group_ctx = cli.make_context("farm", command[1:], resilient_parsing=False)
    subcommand = cli.get_command(group_ctx, command[1])
    assert subcommand is not None, f"no command {command[1]!r}"
    try:
        subcommand.make_context(command[1], command[2:], parent=group_ctx)
    except click.UsageError as exc:
        pytest.fail(f"`{shlex.join(command)}`: {exc.format_message()}")


def _only_loopback() -> bool:
    return all(name == "lo" for _, name in socket.if_nameindex())


@pytest.mark.slow
def test_the_tour_runs_on_a_host(tmp_path: Path) -> None:
    """In order, from a directory laid out like the repository root, on a fresh FARM_HOME."""
    if not _only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    workdir = tmp_path / "clone"
    workdir.mkdir()
    (workdir / "examples").symlink_to(ROOT / "examples")
    env = {
        **os.environ,
        "FARM_HOME": str(tmp_path / "farm-home"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "RAY_USAGE_STATS_ENABLED": "0",
        "COLUMNS": "80",
    }
    ran = []
    for command in tour_commands():
        if command[1] in NEEDS_A_LAB or "--address" in command:  # a running controller's
            continue
        done = subprocess.run(
            [sys.executable, "-m", "ondevice_farm", *command[1:]],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=TOUR_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"`{shlex.join(command)}` exited {done.returncode}:\n{done.stderr[-2000:]}"
        )
        assert "Traceback" not in done.stderr, done.stderr
        ran.append(command[1])
    assert (workdir / "r.html").stat().st_size > 0
    assert {"submit", "compile", "show", "report", "check", "nightly"} <= set(ran)
