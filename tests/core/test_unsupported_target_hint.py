"""A target no selected device runs: the hint names the commands that still give its compile
report and its prediction on this host, and those commands exist as written (their options
parse; the compile runs)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest

from ondevice_farm.cli.main import cli
from ondevice_farm.errors import UsageError

from .conftest import farm

COMMAND = re.compile(r"`(farm [^`]+)`")


def _hint_commands(stderr: str, model: Path) -> list[list[str]]:
    """The hint's commands, MODEL and RUN filled in as a user would."""
    line = stderr.strip()
    return [
        shlex.split(text.replace("MODEL", str(model)).replace("RUN", "latest"))
        for text in COMMAND.findall(line)
    ]


def _parses(argv: list[str]) -> None:
    """`argv` as click would take it: the command exists and takes every option given."""
    assert argv[0] == "farm"
    name, *rest = argv[1:]
    parent = click.Context(cli, info_name="farm")
    command = cli.get_command(parent, name)
    assert command is not None, f"no command {name!r}"
    command.make_context(name, rest, parent=parent)


def test_unsupported_target_names_the_commands_that_run_here(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "-d", "host-cpu", "-t", "ort/cpu,coreml/ane")
    assert result.exit_code == UsageError.exit_code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("farm: error: no selected device supports coreml/ane")
    assert "`farm compile -t coreml/ane MODEL`" in lines[0]
    assert "`farm diverge RUN --predict coreml/ane`" in lines[0]
    assert not (home / "results.sqlite").exists()
    commands = _hint_commands(result.stderr, model)
    assert [c[1] for c in commands] == ["compile", "diverge"]
    for argv in commands:
        _parses(argv)


def test_a_wrong_option_does_not_parse() -> None:
    """The check above can fail: an option the command does not take is refused."""
    with pytest.raises(click.NoSuchOption):
        _parses(["farm", "diverge", "latest", "--prediction", "coreml/ane"])


def test_a_target_the_host_cannot_predict_names_compile_only(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "-d", "host-cpu", "-t", "ort/cpu,coreml-torch/ane")
    assert result.exit_code == UsageError.exit_code
    assert "farm compile -t coreml-torch/ane" in result.stderr and "diverge" not in result.stderr


def test_the_hinted_compile_runs(home: Path, model: Path) -> None:
    pytest.importorskip("coremltools")
    result = farm(home, "submit", str(model), "-d", "host-cpu", "-t", "coreml/ane")
    [compile_argv, _] = _hint_commands(result.stderr, model)
    compiled = farm(home, *compile_argv[1:], "--json")
    assert compiled.exit_code == 0, compiled.stderr
    [report] = json.loads(compiled.stdout)["targets"]
    assert report["target"] == "coreml/ane"
