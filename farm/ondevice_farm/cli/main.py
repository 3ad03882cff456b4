"""`farm`: the command line. Commands live in their own modules, imported only when that command
runs (or `--help` lists them): `farm runs` never loads onnx or Ray, and `farm submit` loads
what a submit needs, not what `farm diverge` does."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from ondevice_farm.cli.context import CliState
from ondevice_farm.errors import DISTRIBUTION

#: command name -> "module:attribute" of its click command
COMMANDS = {
    "submit": "ondevice_farm.cli.submit:submit",
    "devices": "ondevice_farm.cli.devices:devices",
    "runs": "ondevice_farm.cli.runs:runs",
    "show": "ondevice_farm.cli.runs:show",
    "compile": "ondevice_farm.cli.compile_cmd:compile_command",
    "report": "ondevice_farm.cli.report:report",
    "diverge": "ondevice_farm.cli.diverge:diverge",
    "check": "ondevice_farm.cli.check:check",
    "agent": "ondevice_farm.cli.agent:agent",
    "serve": "ondevice_farm.cli.serve:serve",
    "nightly": "ondevice_farm.cli.nightly:nightly",
    "compare": "ondevice_farm.cli.compare:compare",
    "gc": "ondevice_farm.cli.gc:gc",
    "cancel": "ondevice_farm.cli.cancel:cancel",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use: importing them all cost every command
    the union of their imports (onnx alone 1-4 s of CPU, docs/benchmarks.md)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, _, attribute = COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option(
    "--home", type=click.Path(path_type=Path), help="Farm directory (default: $FARM_HOME or ~/.cache/farm)."
)
@click.option("--profiles-dir", type=click.Path(path_type=Path), help="Device profiles directory.")
@click.option(
    "--store",
    "store_url",
    help="Results store: a SQLite file or postgresql://user@host/db "
    "(default: $FARM_STORE, else results.sqlite in the farm directory).",
)
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def cli(
    ctx: click.Context, debug: bool, home: Path | None, profiles_dir: Path | None, store_url: str | None
) -> None:
    """Benchmark one ONNX model on many devices and runtimes, side by side."""
    ctx.obj = CliState(debug=debug, home_dir=home, profiles_dir=profiles_dir, store_url=store_url)


def main() -> None:
    cli(prog_name="farm")
