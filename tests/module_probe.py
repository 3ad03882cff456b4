"""The CLI as `farm` runs it, in a fresh interpreter that writes the modules it loaded as it exits:
`[sys.executable, "-c", CLI_PROBE, OUT_JSON, *farm_args]`, then `json.loads(OUT_JSON)`. What a
command path imports is a fact a test can hold (no onnx on the thin client, no Ray on the API
path), where a time bound breaks on a loaded machine."""

CLI_PROBE = """
import atexit, json, sys
def _dump():
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(_dump)
from ondevice_farm.cli.main import cli
cli(sys.argv[2:], prog_name="farm")
"""
