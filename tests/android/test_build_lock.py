"""Two processes asking for the same native runner build take turns: the second waits for the
first to finish instead of deleting the directory the first is compiling in."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ondevice_farm_agents.android.build_lock import exclusive

HOLD_S = 1.0
HOLDER = """
import sys, time
from pathlib import Path
from ondevice_farm_agents.android.build_lock import exclusive
with exclusive(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    (Path(sys.argv[1]).parent / "first-done").touch()
"""


def test_a_second_builder_waits_for_the_first(tmp_path: Path) -> None:
    where = tmp_path / "build" / "linux-x86_64"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(where), str(HOLD_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        began = time.monotonic()
        with exclusive(where):
            waited_s = time.monotonic() - began
            assert (where.parent / "first-done").exists(), "entered while the first build held the lock"
        assert waited_s > HOLD_S / 4
    finally:
        holder.wait(timeout=30)
    assert holder.returncode == 0
