"""Per-layer errors measured on the job's own device: a copy of the model with the chosen
intermediate tensors exposed as graph outputs is submitted to that device and target like any
model (runs=1, no profile). Its reference check against the same copy on the host reference is,
output by output, the error of each intermediate tensor: no runner needs to know about layers.
Exposing a tensor keeps ONNX Runtime from fusing across it, so the device runs the graph with
those boundaries kept; the curve's note says so.

A `coreml/*` job gets the same copy lowered to an ML Program, run by FarmRunner on the iPhone.
coremltools' passes refuse to fuse away an op whose output is the program's output (they fail
instead), so there each exposed tensor leaves through an Identity of its own, named
`<tensor>__farm_layer` (the I/O name map carries it across CoreML's renaming); the op that
computes the tensor is then kept whole, as on ONNX Runtime.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import onnx
from onnx import helper

from ondevice_farm.analysis.divergence import LayerError, Measure
from ondevice_farm.analysis.intermediates import LayerPoint, with_outputs
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.pipeline import submit
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.errors import DeviceError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress
from ondevice_farm.store import StoreLocation
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings

DEVICE_NOTE = (
    "measured on the job's device: a copy of the model with these tensors exposed as outputs, run once "
    "(exposing a tensor keeps the runtime from fusing across it)"
)
#: the exposed copy of a `coreml/*` job: each tensor leaves the program through an Identity
LAYER_ALIAS_SUFFIX = "__farm_layer"
STANDIN_MARK = "stand-in"
STANDIN_NOTE = (
    "run by {runner}: the ML Program in this host's MIL executor, not CoreML on an iPhone, so these "
    "are the host's numbers for the lowered program (what `--predict` computes), not a phone's"
)


def exposed_copy(
    model: onnx.ModelProto, tensors: list[str], target: Target
) -> tuple[onnx.ModelProto, dict[str, str]]:
    """The copy to run on the device, and each exposed tensor's output name in it."""
    exposed = with_outputs(model, tensors)
    if target.runtime != "coreml":
        return exposed, {t: t for t in tensors}
    own = {o.name for o in model.graph.output}
    names: dict[str, str] = {}
    outputs = []
    for output in exposed.graph.output:
        if output.name in own:
            names[output.name] = output.name
            outputs.append(output)
            continue
        alias = output.name + LAYER_ALIAS_SUFFIX
        exposed.graph.node.append(helper.make_node("Identity", [output.name], [alias], name=alias))
        renamed = onnx.ValueInfoProto()
        renamed.CopyFrom(output)
        renamed.name = alias
        outputs.append(renamed)
        names[output.name] = alias
    del exposed.graph.output[:]
    exposed.graph.output.extend(outputs)
    return exposed, names


def layer_note(runner: str) -> str:
    """What the curve's values are, by the runner that returned them."""
    if STANDIN_MARK in runner:
        return f"{DEVICE_NOTE}; {STANDIN_NOTE.format(runner=runner.split(' (')[0])}"
    return DEVICE_NOTE


def layer_error_from_entry(point: LayerPoint, entry: dict[str, Any], snr_floor_db: float) -> LayerError:
    """A job document's reference entry for an exposed tensor, as that layer's error."""
    nonfinite = sum(int(v) for v in ((entry.get("nonfinite") or {}).get("actual") or {}).values())
    if nonfinite:
        return LayerError(point, None, None, None, nonfinite, diverged=True)
    snr = entry.get("snr_db")
    snr_db = float(snr) if isinstance(snr, int | float) else None
    max_abs = entry.get("max_abs")
    return LayerError(
        point,
        float(max_abs) if isinstance(max_abs, int | float) else None,
        None if snr_db is None else 10 ** (-snr_db / 20),
        snr_db,
        0,
        diverged=snr_db is None or snr_db < snr_floor_db,
    )


def device_measure(
    model_path: Path,
    run: dict[str, Any],
    job: dict[str, Any],
    snr_floor_db: float,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    progress: Progress | None = None,
    store: StoreLocation | None = None,
    runners: list[str] | None = None,
) -> Measure:
    """A `Measure` that runs the exposed copy on `job`'s unit (or profile) and target; each run's
    runner (as its job document names it) is appended to `runners`."""
    model = onnx.load(str(model_path))
    settings_doc = run.get("settings") or {}
    shapes = {
        str(i["name"]): tuple(int(d) for d in i["shape"])
        for i in (run.get("model") or {}).get("inputs") or []
        if i.get("shape")
    }
    devices = str(job.get("requested") or job["device"])
    target = Target.parse(str(job["target"]))
    precision = str(job.get("precision") or "")

    def measure(chosen: list[LayerPoint]) -> list[LayerError]:
        exposed, names = exposed_copy(model, [p.tensor for p in chosen], target)
        with tempfile.TemporaryDirectory(prefix="farm-layers-") as tmp:
            path = Path(tmp) / f"{model_path.stem}.layers.onnx"
            onnx.save(exposed, str(path))
            request = SubmitRequest(
                model_path=path,
                devices=devices,
                targets=[target],
                runs=1,
                warmup=0,
                shapes=shapes,
                seed=int(settings_doc.get("seed") or 0),
                profile_ops=False,
                max_attempts=1,
                # the program at the job's own precision (the run compiled it so)
                coreml_precision=precision if precision in ("fp16", "fp32") else "fp16",
            )
            document = submit(
                request,
                home=home,
                profiles=profiles,
                settings=settings,
                cluster=cluster,
                progress=progress,
                store=store,
            )
        (done,) = document["jobs"]
        if done["status"] != "ok":
            raise DeviceError(f"the layer run on {devices} failed: {done.get('error')}")
        outputs = (done.get("reference") or {}).get("outputs") or {}
        if runners is not None:
            runners.append(str(done.get("runner") or ""))
        return [
            layer_error_from_entry(p, outputs[names[p.tensor]], snr_floor_db)
            for p in chosen
            if names.get(p.tensor) in outputs
        ]

    return measure
