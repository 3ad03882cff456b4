"""deploy/: the pieces agree with each other and with farm's defaults, and systemd accepts the units."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ondevice_farm.api.wire import DEFAULT_API_PORT
from ondevice_farm.metrics.server import DEFAULT_METRICS_PORT

from .conftest import DEPLOY

UNITS = sorted((DEPLOY / "systemd").glob("farm-*.*"))


def _env() -> dict[str, str]:
    lines = (DEPLOY / "systemd" / "farm.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_ports_agree_across_the_kit() -> None:
    env = _env()
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in prometheus["scrape_configs"]}
    assert targets["farm"] == [f"{env['FARM_METRICS_HOST']}:{env['FARM_METRICS_PORT']}"]
    assert int(env["FARM_METRICS_PORT"]) == DEFAULT_METRICS_PORT
    assert int(env["FARM_API_PORT"]) == DEFAULT_API_PORT
    serve = (DEPLOY / "systemd" / "farm-serve.service").read_text()
    assert "--api-host ${FARM_API_HOST} --api-port ${FARM_API_PORT}" in serve
    assert targets["pushgateway"] == [env["FARM_PUSHGATEWAY_URL"].removeprefix("http://")]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    assert "--web.listen-address=127.0.0.1:9091" in compose["pushgateway"]["command"]
    listen = next(a for a in compose["prometheus"]["command"] if a.startswith("--web.listen-address="))
    (datasource,) = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert datasource["url"] == "http://" + listen.split("=", 1)[1]
    assert datasource["jsonData"]["timeInterval"] == prometheus["global"]["scrape_interval"]
    assert "./prometheus:/etc/prometheus:ro" in compose["prometheus"]["volumes"]


def test_every_unit_reads_the_env_file_and_the_timer_starts_the_nightly() -> None:
    assert {u.name for u in UNITS} >= {
        "farm-serve.service",
        "farm-agent.service",
        "farm-nightly.service",
        "farm-nightly.timer",
    }
    for unit in UNITS:
        if unit.suffix == ".service":
            assert "EnvironmentFile=/etc/farm/farm.env" in unit.read_text(), unit.name
    timer = (DEPLOY / "systemd" / "farm-nightly.timer").read_text()
    assert "OnCalendar=" in timer and "Persistent=true" in timer


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (package systemd)")
    for unit in UNITS:
        # the units name the installed farm; any executable stands in for it here
        text = (
            unit.read_text()
            .replace("/opt/farm/.venv/bin/farm", "/bin/true")
            .replace("/opt/farm/.venv/bin/ray", "/bin/true")
        )
        (tmp_path / unit.name).write_text(text)
    done = subprocess.run(
        [analyze, "verify", *(str(tmp_path / u.name) for u in UNITS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_every_node_runs_with_ray_token_auth() -> None:
    """A Ray node runs code for whoever reaches its port: the kit turns token auth on for the head,
    the controller, the agents and the nightly alike (one env file), and the head will not start
    without its token."""
    env = _env()
    assert env["RAY_AUTH_MODE"] == "token"
    # the farm user's home is /var/lib/farm: where Ray and farm look for the token by default too
    assert env["RAY_AUTH_TOKEN_PATH"] == "/var/lib/farm/.ray/auth_token"
    head = (DEPLOY / "systemd" / "farm-ray-head.service").read_text()
    assert "ExecStartPre=/usr/bin/test -s ${RAY_AUTH_TOKEN_PATH}" in head


def test_every_farm_command_of_the_units_takes_the_options_they_give() -> None:
    """A unit starts `farm COMMAND --option ...`: each option must be one the command has (the
    nightly's `--cancel-on-stop` is what makes `systemctl stop` end the night, not just its follower)."""
    import click

    from ondevice_farm.cli.main import cli

    commands: dict[str, tuple[str, list[str]]] = {}
    for unit in UNITS:
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart=/opt/farm/.venv/bin/farm "):
                words = line.split()[1:]
                commands[unit.name] = (words[0], [w for w in words if w.startswith("--")])
    assert commands["farm-nightly.service"][1][-1] == "--cancel-on-stop"
    for unit_name, (name, options) in commands.items():
        command = cli.get_command(click.Context(cli), name)
        assert command is not None, (unit_name, name)
        known = {o for p in command.params for o in p.opts}
        assert set(options) <= known, (unit_name, set(options) - known)
