"""The documented operator support of each accelerator, read from the data files next to this
module (each names its source) or, for CoreML, from the farm's own lowering table."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from ondevice_farm.targets import Target

#: ONNX Runtime backend -> data file
ORT_SUPPORT_FILES = {"nnapi": "nnapi.yaml", "xnnpack": "xnnpack.yaml", "qnn": "qnn.yaml"}
COREML_EP_FILE = "coreml_ep.yaml"
COREML_LOWERING_SOURCE = (
    "farm/ondevice_farm/runtimes/coreml/compile/table.py (the farm's ONNX -> MIL lowering)"
)


@dataclass(frozen=True)
class OpSupport:
    """What one accelerator takes: op type -> condition note ("" when unconditional)."""

    provider: str
    source: str
    ops: dict[str, str]
    #: op types taken only when fused into the node that produces their input
    fused_only: dict[str, str] = field(default_factory=dict)
    #: the graph the table applies to: `ort-basic` (after ORT's basic fusions) or `source`
    graph: str = "ort-basic"

    def takes(self, op_type: str) -> bool:
        return op_type in self.ops


def _load(name: str) -> dict[str, Any]:
    text = resources.files("ondevice_farm.preflight").joinpath("data", name).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{name}: not a mapping")
    return data


def _from_file(name: str, graph: str) -> OpSupport:
    data = _load(name)
    return OpSupport(
        provider=str(data["provider"]),
        source=str(data["source"]),
        ops={str(k): str(v or "") for k, v in (data.get("ops") or {}).items()},
        fused_only={str(k): str(v or "") for k, v in (data.get("fused_only") or {}).items()},
        graph=graph,
    )


def coreml_support() -> OpSupport:
    """The farm's CoreML lowering table where it is installed (an op it cannot lower stops the
    compile), else ONNX Runtime's documented CoreML ML Program list as the nearest stand-in."""
    try:
        from ondevice_farm.runtimes.coreml.compile.table import lowering_table

        ops = {op: "" for op in lowering_table()}
    except Exception:  # an engineer's module in progress or coremltools missing: degrade, do not fail
        return _from_file(COREML_EP_FILE, graph="source")
    return OpSupport(provider="CoreML", source=COREML_LOWERING_SOURCE, ops=ops, graph="source")


def support_for(target: Target) -> OpSupport | None:
    """None where nothing is to predict: CPU targets run every op, CUDA has no table here."""
    if target.runtime == "ort" and target.backend in ORT_SUPPORT_FILES:
        return _from_file(ORT_SUPPORT_FILES[target.backend], graph="ort-basic")
    if target.runtime == "coreml" and target.backend != "cpu":
        return coreml_support()
    return None
