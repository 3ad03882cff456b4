"""Per-layer errors measured on the job's own device: a copy of the model with the chosen
intermediate tensors exposed as graph outputs is submitted to that device and target like any
model (runs=1, no profile). Its reference check against the same copy on the host reference is,
output by output, the error of each intermediate tensor: no runner needs to know about layers.
Exposing a tensor keeps ONNX Runtime from fusing across it, so the device runs the graph with
those boundaries kept; the curve's note says so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import onnx

from ondevice_farm.analysis.divergence import LayerError, Measure
from ondevice_farm.analysis.intermediates import LayerPoint, with_outputs
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.pipeline import Progress, SubmitRequest, submit
from ondevice_farm.errors import DeviceError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.store import StoreLocation
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings

DEVICE_NOTE = (
    "measured on the job's device: a copy of the model with these tensors exposed as outputs, run once "
    "(exposing a tensor keeps the runtime from fusing across it)"
)


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
) -> Measure:
    """A `Measure` that runs the exposed copy on `job`'s unit (or profile) and target."""
    model = onnx.load(str(model_path))
    settings_doc = run.get("settings") or {}
    shapes = {
        str(i["name"]): tuple(int(d) for d in i["shape"])
        for i in (run.get("model") or {}).get("inputs") or []
        if i.get("shape")
    }
    devices = str(job.get("requested") or job["device"])

    def measure(chosen: list[LayerPoint]) -> list[LayerError]:
        exposed = with_outputs(model, [p.tensor for p in chosen])
        with tempfile.TemporaryDirectory(prefix="farm-layers-") as tmp:
            path = Path(tmp) / f"{model_path.stem}.layers.onnx"
            onnx.save(exposed, str(path))
            request = SubmitRequest(
                model_path=path,
                devices=devices,
                targets=[Target.parse(str(job["target"]))],
                runs=1,
                warmup=0,
                shapes=shapes,
                seed=int(settings_doc.get("seed") or 0),
                profile_ops=False,
                max_attempts=1,
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
        return [
            layer_error_from_entry(p, outputs[p.tensor], snr_floor_db) for p in chosen if p.tensor in outputs
        ]

    return measure
