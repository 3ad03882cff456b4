"""`farm`: the command line. Commands live in their own modules and import heavy libraries
(Ray, coremltools) only when they run."""

from __future__ import annotations

from pathlib import Path

import click

from ondevice_farm.cli.context import CliState
from ondevice_farm.errors import DISTRIBUTION


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


def _register() -> None:
    from ondevice_farm.cli import compile_cmd, devices, runs, submit

    cli.add_command(submit.submit)
    cli.add_command(devices.devices)
    cli.add_command(runs.runs)
    cli.add_command(runs.show)
    cli.add_command(compile_cmd.compile_command)

    from ondevice_farm.cli import check, diverge, report

    cli.add_command(report.report)
    cli.add_command(diverge.diverge)
    cli.add_command(check.check)

    from ondevice_farm.cli import agent, nightly, serve

    cli.add_command(agent.agent)
    cli.add_command(serve.serve)
    cli.add_command(nightly.nightly)


_register()


def main() -> None:
    cli(prog_name="farm")
