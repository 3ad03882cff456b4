"""`IosAgent`: iPhones on USB as farm units, running CoreML through the FarmRunner app.

Per job: discover (usbmux + lockdown `ProductType` -> device profile), prepare (install
FarmRunner once, push the model and inputs into its container, cached by hash), run
(job file -> launch -> the app waits for a nominal thermal state, compiles, loads, loads again
warm, times the predictions, holds the load for the battery window, runs the sustained phase,
asks MLComputePlan where each op runs -> result file -> pulled here). Around the job the host
samples the battery gauge (`battery.py`): at idle before the launch, and all through the job.
"""

from __future__ import annotations

import logging
import statistics
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ondevice_farm.compile.io_names import IoNameMap, load_io_names
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.profiles import match_profile
from ondevice_farm_agents.base import (
    WARM_LOAD_COMPILED_AGAIN,
    AgentSettings,
    DeviceAgent,
    DeviceRun,
    DeviceUnit,
    Health,
    OpTiming,
    RunRequest,
    Thermal,
)
from ondevice_farm_agents.ios.battery import BatterySampler, EnergySettings, energy_from_log
from ondevice_farm_agents.ios.bridge import AsyncBridge
from ondevice_farm_agents.ios.container import (
    INPUTS_DIR,
    JOBS_DIR,
    MODELS_DIR,
    AppContainer,
    artifact_empty_dirs,
    artifact_files,
)
from ondevice_farm_agents.ios.contract import (
    JOB_SCHEMA_ID,
    MODEL_FORMATS,
    compute_units,
    inputs_digest,
    tensor_bytes,
)
from ondevice_farm_agents.ios.install import ensure_installed
from ondevice_farm_agents.ios.inventory import read_battery_pct, read_properties
from ondevice_farm_agents.ios.job import DEFAULT_POLL_S, JobOutcome, run_job
from ondevice_farm_agents.ios.link import DeviceLink
from ondevice_farm_agents.ios.provider import DEFAULT_TUNNELD_ADDRESS, ConnectionProvider, UsbmuxProvider
from ondevice_farm_agents.ios.sustained import sustained_trace

log = logging.getLogger(__name__)

DEFAULT_BUNDLE_ID = "dev.farm.FarmRunner"
DEFAULT_THERMAL_WAIT_FOR = "nominal"
#: how an iOS per-op time is derived: CoreML times no single op, MLComputePlan weighs them
OP_TIME_FORMULA = "mean_us = MLComputePlan estimated_cost (the op's weight, 0..1) x median latency_ms x 1000"


@dataclass(frozen=True)
class IosOptions:
    """The iOS agent's settings, read from `AgentSettings.extra` (keys `ios_*`, from `FARM_AGENT_IOS_*`)."""

    bundle_id: str | None = None
    app_package: Path | None = None
    udids: tuple[str, ...] = ()
    usbmux_address: str | None = None
    tunneld_address: tuple[str, int] = DEFAULT_TUNNELD_ADDRESS
    usb_only: bool = True
    poll_s: float = DEFAULT_POLL_S
    thermal_deadline_s: float | None = None
    thermal_wait_for: str = DEFAULT_THERMAL_WAIT_FOR

    @classmethod
    def from_extra(cls, extra: dict[str, str]) -> IosOptions:
        known = {
            "ios_bundle_id", "ios_app_package", "ios_udids", "ios_usbmux_address", "ios_tunneld",
            "ios_connection", "ios_poll_s", "ios_thermal_deadline_s", "ios_thermal_wait_for",
            "ios_energy_idle_s", "ios_energy_min_active_s", "ios_energy_sample_s",
        }  # fmt: skip
        unknown = sorted(k for k in extra if k.startswith("ios_") and k not in known)
        if unknown:
            raise UsageError(f"unknown iOS agent setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
        tunneld = extra.get("ios_tunneld")
        connection = extra.get("ios_connection", "usb")
        if connection not in ("usb", "any"):
            raise UsageError(f"ios_connection must be 'usb' or 'any', got {connection!r}")
        try:
            return cls(
                bundle_id=extra.get("ios_bundle_id"),
                app_package=Path(extra["ios_app_package"]) if "ios_app_package" in extra else None,
                udids=tuple(u.strip() for u in extra.get("ios_udids", "").split(",") if u.strip()),
                usbmux_address=extra.get("ios_usbmux_address"),
                tunneld_address=_host_port(tunneld) if tunneld else DEFAULT_TUNNELD_ADDRESS,
                usb_only=connection == "usb",
                poll_s=float(extra.get("ios_poll_s", DEFAULT_POLL_S)),
                thermal_deadline_s=float(extra["ios_thermal_deadline_s"])
                if "ios_thermal_deadline_s" in extra
                else None,
                thermal_wait_for=extra.get("ios_thermal_wait_for", DEFAULT_THERMAL_WAIT_FOR),
            )
        except ValueError as exc:
            raise UsageError(f"bad iOS agent setting: {exc}") from None


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"ios_tunneld must be host:port, got {text!r}")
    return host, int(port)


class IosAgent(DeviceAgent):
    platform = "ios"

    def __init__(self, settings: AgentSettings, provider: ConnectionProvider | None = None) -> None:
        super().__init__(settings)
        self.options = IosOptions.from_extra(settings.extra)
        self.energy = EnergySettings.from_extra(settings.extra)
        self._provider: ConnectionProvider = provider or UsbmuxProvider(
            usbmux_address=self.options.usbmux_address,
            tunneld_address=self.options.tunneld_address,
            connection_type="USB" if self.options.usb_only else None,
        )
        self._bridge = AsyncBridge()
        #: serials whose FarmRunner was checked (and installed if needed) by this agent
        self._app_checked: set[str] = set()

    def discover(self) -> list[DeviceUnit]:
        try:
            serials = self._bridge.call(
                self._provider.serials(), timeout_s=self.settings.io_timeout_s, where="usbmux"
            )
        except DeviceError as exc:
            log.info("no iOS devices: %s", exc)
            return []
        units = []
        for serial in serials:
            if self.options.udids and serial not in self.options.udids:
                continue
            try:
                properties = read_properties(self._link(serial))
            except DeviceError as exc:
                log.warning("skipping %s: %s", serial, exc)
                continue
            profile = match_profile(properties, self.settings.profiles, self.platform)
            if profile is None:
                log.warning("skipping %s: no device profile recognises ProductType %s", serial,
                            properties.get("ProductType", "?"))  # fmt: skip
                continue
            units.append(DeviceUnit(profile.name, serial, self.platform, properties))
        return units

    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        link = self._link(unit.serial)
        bundle_id = self._bundle_id(unit)
        if unit.serial not in self._app_checked:
            done = ensure_installed(link, bundle_id, self.options.app_package)
            log.info("%s: FarmRunner %s", unit.name, done)
            self._app_checked.add(unit.serial)
        container = AppContainer(link, bundle_id)
        container.remove(JOBS_DIR)  # left behind by a job whose phone went away
        self._push(container, request)

    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        return self._run(unit, request, with_energy=self.energy.enabled)

    def measure_session(self, unit: DeviceUnit, request: RunRequest) -> list[float]:
        # a repeat measures latency only: the first session's energy and sustained phase are the job's
        again = replace(request, profile_ops=False, repeats=1, sustained_s=0.0)
        return self._run(unit, again, with_energy=False).samples_ms

    def _run(self, unit: DeviceUnit, request: RunRequest, with_energy: bool) -> DeviceRun:
        link = self._link(unit.serial)
        bundle_id = self._bundle_id(unit)
        container = AppContainer(link, bundle_id)
        io_names = request_io_names(request)
        model_path, input_files = self._push(container, request, io_names)
        job_id = uuid.uuid4().hex[:16]
        thermal_deadline_s = self._thermal_deadline_s(unit)
        sampler = BatterySampler(link, self.energy) if with_energy else None
        if sampler is not None:
            sampler.idle()
        # a phone whose battery cannot tell (charging, no gauge values) is spared the loaded window
        min_active_s = self.energy.min_active_s if sampler is not None and not sampler.log.absent else 0.0
        job: dict[str, Any] = {
            "schema": JOB_SCHEMA_ID,
            "job_id": job_id,
            "model": {
                "path": model_path,
                "format": MODEL_FORMATS[request.artifact.suffix],
                "sha256": request.artifact_sha256,
            },
            "compute_units": compute_units(request.target),
            "warmup": request.warmup,
            "runs": request.runs,
            "profile_ops": request.profile_ops,
            "min_active_s": min_active_s,
            "thermal": {"wait_for": self.options.thermal_wait_for, "deadline_s": thermal_deadline_s},
            "sustained": {"duration_s": request.sustained_s, "window_s": request.sustained_window_s},
            "inputs": input_files,
            "outputs": [{"name": f.feature_name, "onnx_name": f.onnx_name} for f in io_names.outputs]
            if io_names is not None
            else [],
            "result_path": f"{JOBS_DIR}/{job_id}/result.json",
            "outputs_dir": f"{JOBS_DIR}/{job_id}/outputs",
        }
        outcome = run_job(
            link,
            container,
            bundle_id,
            job,
            deadline_s=thermal_deadline_s + request.timeout_s + min_active_s,
            poll_s=self.options.poll_s,
            during=sampler.during_job if sampler is not None else None,
            cancelled=lambda: self.cancellation.cancelled(unit.serial),
        )
        run = _device_run(outcome)
        run.controls = self.session_controls(unit, request)
        if sampler is not None:
            result = outcome.result
            run.energy = energy_from_log(
                sampler.log, result.active_span_unix_s, result.active_inferences, self.energy.sample_s
            )
        return run

    def session_controls(self, unit: DeviceUnit, request: RunRequest) -> dict[str, str]:
        """CoreML takes no thread count and no spinning setting, and iOS lets no app pin itself
        to cores (the scheduler alone places threads on performance or efficiency cores)."""
        return {"threads": "not controllable", "affinity": "not controllable", "spinning": "not controllable"}

    def health(self, unit: DeviceUnit) -> Health:
        try:
            battery = read_battery_pct(self._link(unit.serial))
        except DeviceError as exc:
            return Health(up=False, reason=str(exc))
        # The thermal state is only visible inside an app; each job's result carries it.
        return Health(up=True, thermal=Thermal(status="unknown", battery_pct=battery))

    def close(self) -> None:
        self._bridge.close()

    def _link(self, serial: str) -> DeviceLink:
        return DeviceLink(self._bridge, self._provider, serial, self.settings.io_timeout_s)

    def _bundle_id(self, unit: DeviceUnit) -> str:
        profile = self.settings.profiles.get(unit.profile)
        from_profile = profile.runner.get("bundle_id") if profile is not None else None
        return self.options.bundle_id or from_profile or DEFAULT_BUNDLE_ID

    def _thermal_deadline_s(self, unit: DeviceUnit) -> float:
        if self.options.thermal_deadline_s is not None:
            return self.options.thermal_deadline_s
        profile = self.settings.profiles.get(unit.profile)
        return profile.thermal.cooldown_deadline_s if profile is not None else 600.0

    def _push(
        self, container: AppContainer, request: RunRequest, io_names: IoNameMap | None = None
    ) -> tuple[str, list[dict[str, Any]]]:
        """Push the model and the inputs (each skipped when already there); their paths for the job."""
        if request.artifact.suffix not in MODEL_FORMATS:
            raise UsageError(f"{request.artifact}: the iOS agent takes {', '.join(MODEL_FORMATS)} models")
        model_dir = f"{MODELS_DIR}/{request.artifact_sha256}"
        container.push_cached(
            dict(artifact_files(request.artifact)), model_dir, artifact_empty_dirs(request.artifact)
        )
        inputs_dir = f"{INPUTS_DIR}/{inputs_digest(request.inputs)}"
        files: dict[str, bytes | Path] = {}
        described = []
        for index, name in enumerate(sorted(request.inputs)):
            dtype, data = tensor_bytes(request.inputs[name])
            files[f"{index}.bin"] = data
            shape = [int(d) for d in request.inputs[name].shape]
            feature = io_names.input_feature(name) if io_names is not None else name
            described.append(
                {
                    "name": feature,
                    "onnx_name": name,
                    "dtype": dtype,
                    "shape": shape,
                    "path": f"{inputs_dir}/{index}.bin",
                }
            )
        container.push_cached(files, inputs_dir)
        return f"{model_dir}/{request.artifact.name}", described


def request_io_names(request: RunRequest) -> IoNameMap | None:
    """The job's I/O name map: the request's, else the one stored beside the artifact."""
    return request.io_names if request.io_names is not None else load_io_names(request.artifact)


def _device_run(outcome: JobOutcome) -> DeviceRun:
    result = outcome.result
    load = (
        f"load = compile {result.compile_ms:.1f} ms + load {result.load_ms:.1f} ms"
        if result.compile_ms is not None
        else f"load = load {result.load_ms:.1f} ms (the runner timed no compile step)"
    )
    notes = [
        f"{load}; warm load = a second load of the compiled model, the first still loaded "
        f"(no compile): {result.warm_load_ms:.1f} ms",
        f"thermal wait {result.thermal_waited_ms:.0f} ms before the job",
    ]
    median_ms = statistics.median(result.samples_ms) if result.samples_ms else result.first_inference_ms
    ops = [
        OpTiming(
            name=op.name,
            op_type=op.op_type,
            provider=op.preferred_device,
            mean_us=(op.estimated_cost or 0.0) * median_ms * 1000.0,
            source="estimated",
        )
        for op in result.plan_ops
    ]
    if ops:
        notes.append(
            "per-op times are MLComputePlan estimated-cost shares of the median latency, not measured"
        )
    if result.plan_note:
        notes.append(f"no per-op placement: {result.plan_note}")
    return DeviceRun(
        load_ms=(result.compile_ms or 0.0) + result.load_ms,
        first_inference_ms=result.first_inference_ms,
        samples_ms=list(result.samples_ms),
        outputs=outcome.outputs,
        ops=ops,
        placement={op.name: op.preferred_device for op in result.plan_ops},
        peak_memory_bytes=result.peak_footprint_bytes,
        thermal_before=Thermal(status=result.thermal_before),
        thermal_after=Thermal(status=result.thermal_after),
        runner=f"{result.runner} (iOS {result.os_version})",
        notes=notes,
        placement_source="planned",
        formulas={"op_times": OP_TIME_FORMULA} if ops else {},
        peak_memory_kind="phys_footprint",
        warm_load_ms=result.warm_load_ms,
        warm_load_method=WARM_LOAD_COMPILED_AGAIN,
        sustained=sustained_trace(result.sustained) if result.sustained is not None else None,
    )
