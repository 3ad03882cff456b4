"""A real `farm serve` for a test, started as a user's shell would (nothing exported), stopped after."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from tests.fleet.cluster import kill_tree

FARM = str(Path(sys.executable).parent / "farm")
START_TIMEOUT_S = 120


def clean_env(home: Path, farm_home: Path) -> dict[str, str]:
    """What a user's shell has: no RAY_* or FARM_* variable exported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "FARM_"))}
    env.update(HOME=str(home), FARM_HOME=str(farm_home), RAY_USAGE_STATS_ENABLED="0")
    return env


class Serving(NamedTuple):
    process: subprocess.Popen[str]
    #: its embedded Ray, host:port
    address: str
    #: its submit API, http://host:port
    api_url: str


@contextmanager
def farm_serve(home: Path, farm_home: Path, *args: str, wrapper: tuple[str, ...] = ()) -> Iterator[Serving]:
    """`farm serve ARGS` (its submit API on a free port unless ARGS say otherwise) and where it
    listens; Ctrl-C'd and its tree killed after. `wrapper`: a command that execs it (e.g. into a
    network namespace of its own), so that the pid is still farm serve's."""
    api = [] if "--api-port" in args else ["--api-port", "0"]
    process = subprocess.Popen(
        [*wrapper, FARM, "serve", *api, *args],
        env=clean_env(home, farm_home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        address = api_url = None
        deadline = time.monotonic() + START_TIMEOUT_S
        lines: list[str] = []
        while (address is None or api_url is None) and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                raise AssertionError("farm serve exited:\n" + "".join(lines[-30:]))
            lines.append(line)
            if found := re.search(r"embedded Ray at (\S+?);", line):
                address = found.group(1)
            if found := re.search(r"submit API on (http://\S+?):? ", line):
                api_url = found.group(1)
        assert address is not None and api_url is not None, "".join(lines[-30:])
        yield Serving(process, address, api_url)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            kill_tree(process.pid)
