"""farm: an on-device ML benchmark farm. The Python API (docs/python.md):

    import ondevice_farm as farm

    run = farm.submit("model.onnx", devices="host-cpu", targets=["ort/cpu"])
    run.jobs_frame()                      # pandas, one row per job
    farm.compare("a.onnx", "b.onnx").pairs
    farm.assert_not_slower("a.onnx", "b.onnx", devices="host-cpu")

The names below are the stable API; every module under `ondevice_farm` may change. They are
imported on first use: `import ondevice_farm` (which every farm command does) stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ondevice_farm.errors import FarmError
    from ondevice_farm.python_api.comparing import Comparison, Pair, compare
    from ondevice_farm.python_api.compiling import Compiled, CompiledTarget, compile_model
    from ondevice_farm.python_api.notebook import LineProgress
    from ondevice_farm.python_api.place import Farm
    from ondevice_farm.python_api.stored import RunInfo, delete_runs, load_run, runs
    from ondevice_farm.python_api.submitting import submit
    from ondevice_farm.python_api.suites import Night, Verdict, run_suite
    from ondevice_farm.python_api.testing import SlowerError, assert_not_slower
    from ondevice_farm.python_api.values import Job, Latency, Op, Run

#: public name -> the module that defines it
_EXPORTS = {
    "Farm": "ondevice_farm.python_api.place",
    "submit": "ondevice_farm.python_api.submitting",
    "compile_model": "ondevice_farm.python_api.compiling",
    "Compiled": "ondevice_farm.python_api.compiling",
    "CompiledTarget": "ondevice_farm.python_api.compiling",
    "compare": "ondevice_farm.python_api.comparing",
    "Comparison": "ondevice_farm.python_api.comparing",
    "Pair": "ondevice_farm.python_api.comparing",
    "runs": "ondevice_farm.python_api.stored",
    "run_suite": "ondevice_farm.python_api.suites",
    "Night": "ondevice_farm.python_api.suites",
    "Verdict": "ondevice_farm.python_api.suites",
    "RunInfo": "ondevice_farm.python_api.stored",
    "load_run": "ondevice_farm.python_api.stored",
    "delete_runs": "ondevice_farm.python_api.stored",
    "Run": "ondevice_farm.python_api.values",
    "Job": "ondevice_farm.python_api.values",
    "Latency": "ondevice_farm.python_api.values",
    "Op": "ondevice_farm.python_api.values",
    "assert_not_slower": "ondevice_farm.python_api.testing",
    "SlowerError": "ondevice_farm.python_api.testing",
    "LineProgress": "ondevice_farm.python_api.notebook",
    "FarmError": "ondevice_farm.errors",
}

__all__ = [
    "Comparison",
    "Compiled",
    "CompiledTarget",
    "Farm",
    "FarmError",
    "Job",
    "Latency",
    "LineProgress",
    "Night",
    "Op",
    "Pair",
    "Run",
    "RunInfo",
    "SlowerError",
    "Verdict",
    "assert_not_slower",
    "compare",
    "compile_model",
    "delete_runs",
    "load_run",
    "run_suite",
    "runs",
    "submit",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ondevice_farm' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
