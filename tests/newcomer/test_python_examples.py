"""docs/python.md's examples run as written: read from the document itself (every ```python block
under `## Examples`, in order, as one program), type-checked with mypy --strict, then run in a
fresh process; so the API, its docs and a user's program cannot drift apart."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"
EXAMPLES_TIMEOUT_S = 400
#: the examples checked strictly against the API's own types; the farm's other modules are not
#: followed (their types are checked by the repository's own mypy run, and following them all
#: costs a minute of CI)
EXAMPLES_MYPY_INI = f"""[mypy]
strict = True
python_version = 3.11
mypy_path = {ROOT / "farm"}:{ROOT / "agents"}
follow_imports = skip
ignore_missing_imports = True

[mypy-ondevice_farm,ondevice_farm.python_api.*]
follow_imports = silent
"""


def example_program() -> str:
    section = DOC.read_text(encoding="utf-8").split("## Examples", 1)[1]
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert len(blocks) >= 4, "the examples: submit, compare, a pytest budget, compile"
    return "\n\n".join(blocks)


def test_the_public_names_are_the_documented_ones() -> None:
    import ondevice_farm

    documented = set(re.findall(r"^\| `(\w+)\(", DOC.read_text(encoding="utf-8"), flags=re.M))
    assert documented <= set(ondevice_farm.__all__), documented - set(ondevice_farm.__all__)
    for name in ondevice_farm.__all__:
        assert getattr(ondevice_farm, name) is not None
    # the lazy table and the literal `__all__` (what `from ondevice_farm import *` reads) agree
    assert sorted(ondevice_farm.__all__) == sorted(ondevice_farm._EXPORTS)


def test_the_examples_type_check_and_run(tmp_path: Path) -> None:
    program = tmp_path / "examples.py"
    program.write_text(example_program(), encoding="utf-8")
    (tmp_path / "mypy.ini").write_text(EXAMPLES_MYPY_INI, encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), "--no-incremental",
         "--cache-dir", str(tmp_path / "mypy"), str(program)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-3000:]
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "tinynet.onnx", tmp_path / "examples" / "tinynet.onnx")
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=EXAMPLES_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert re.search(r"slower: B/A \d\.\d+ \[\d\.\d+, \d\.\d+\] after \d+ rounds", done.stdout), done.stdout
    assert "host-cpu" in done.stdout and "CPUExecutionProvider" in done.stdout
    assert "[1/1] host-cpu ort/cpu: ok, p50" in done.stderr  # progress as plain lines, no escape codes
    assert "\x1b[" not in done.stderr
