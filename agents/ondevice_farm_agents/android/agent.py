"""`AndroidAgent`: units reached over ADB, run with the native runner, the Python farm runner or
onnxruntime_perf_test.

Settings it reads (all from `AgentSettings`): `adb_tcp_addresses` and `adb_usb` (which
units), `adb_key_path` (the host's key; adb's own by default), `io_timeout_s` (every device
call), and in `extra`: `adb_device_root` (default /data/local/tmp/farm),
`adb_cache_limit_bytes` (default 2 GiB) and `native_runner_root` (default build/native of
this checkout). Per profile, `runner.kind` is `native` (the default: the farm's C++ runner,
pushed with its libonnxruntime.so; `runner.native_target` overrides the build chosen by ABI,
`runner.qnn_lib_dir` and `runner.qnn_ep_library` name QNN's files on the unit), `farm-runner`
(with `runner.python`, default python3) or `onnxruntime_perf_test` (with `runner.path`). Every
kind takes `runner.options_<backend>`, e.g. `options_qnn: backend_path|libQnnHtp.so`.

Noise controls (`RunRequest.cpu_affinity`, `allow_spinning`, `intra_op_threads`): the native
runner applies all three and reports what it applied, which `DeviceRun.controls` and
`session_controls` give back; onnxruntime_perf_test takes threads (`-x`) and spinning (`-C`), not
affinity; the farm runner takes threads only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import DeviceError, DeviceLostError, DeviceTimeoutError, UsageError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.android.battery import BatteryState, EnergySettings, parse_probe, probe_command
from ondevice_farm_agents.android.device_paths import DEFAULT_DEVICE_ROOT, DevicePaths, q
from ondevice_farm_agents.android.edge_jobs import EdgeRunner, stage_edge
from ondevice_farm_agents.android.generate_job import AndroidGeneration
from ondevice_farm_agents.android.inventory import make_unit, parse_getprop
from ondevice_farm_agents.android.keys import load_signer
from ondevice_farm_agents.android.model_item import model_data_names, model_item, model_on_unit
from ondevice_farm_agents.android.native_build import DEFAULT_BUILD_ROOT
from ondevice_farm_agents.android.native_runner import (
    RUNNER_BINARY,
    NativeCommand,
    NativeRunner,
    cpu_list,
    ep_options,
    find_build,
    spinning_text,
)
from ondevice_farm_agents.android.perf_test import perf_test_options, provider_options
from ondevice_farm_agents.android.push_cache import DEFAULT_CACHE_LIMIT_BYTES, Cached, PushCache, describe
from ondevice_farm_agents.android.runners import FARM_RUNNER_NAME, FarmRunner, PerfTestRunner, StagedJob
from ondevice_farm_agents.android.test_data import write_test_data
from ondevice_farm_agents.android.thermal import (
    parse_sysfs_zones,
    parse_thermalservice,
    wait_until_cool,
    with_battery,
)
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import (
    AgentSettings,
    DeviceAgent,
    DeviceRun,
    DeviceUnit,
    EnergyEstimate,
    Health,
    RunRequest,
    Thermal,
)
from ondevice_farm_agents.runtimes import SESSION_RUNTIMES

log = logging.getLogger(__name__)

NATIVE = "native"
FARM_RUNNER = "farm-runner"
PERF_TEST = "onnxruntime_perf_test"
RUNNER_KINDS = (NATIVE, FARM_RUNNER, PERF_TEST)
DEFAULT_PERF_TEST_PATH = f"{DEFAULT_DEVICE_ROOT}/bin/onnxruntime_perf_test"
_BATTERY_MARK = "__farm_battery__"
_THERMAL_COMMAND = (
    "if command -v dumpsys >/dev/null 2>&1; then dumpsys thermalservice; "
    f"echo {_BATTERY_MARK}; dumpsys battery; else "
    'for z in /sys/class/thermal/thermal_zone*; do [ -r "$z/temp" ] && '
    'echo "$(cat "$z/type") $(cat "$z/temp")"; done; fi; true'
)


class AndroidAgent(DeviceAgent):
    platform = "android"

    def __init__(self, settings: AgentSettings) -> None:
        super().__init__(settings)
        self._paths = DevicePaths(settings.extra.get("adb_device_root", DEFAULT_DEVICE_ROOT))
        self._cache_limit = int(settings.extra.get("adb_cache_limit_bytes", DEFAULT_CACHE_LIMIT_BYTES))
        self._native_root = Path(settings.extra.get("native_runner_root", DEFAULT_BUILD_ROOT))
        self._energy = EnergySettings.from_extra(settings.extra)
        self._signer: Any = None
        self._connections: dict[str, AdbConnection] = {}
        self._staged: dict[tuple[str, str, str], StagedJob] = {}
        #: the controls the native runner last reported applying, per (serial, sha256, target)
        self._applied: dict[tuple[str, str, str], dict[str, str]] = {}
        #: generation jobs (an ONNX Runtime GenAI folder, the native generation runner)
        self._generations = AndroidGeneration(self._paths, self._native_root, self._cache_limit)

    # -- units -------------------------------------------------------------------------------
    def discover(self) -> list[DeviceUnit]:
        units = []
        for serial in self._serials():
            try:
                props = parse_getprop(self._conn(serial).shell("getprop").output)
            except DeviceError as exc:
                log.warning("android: %s is not reachable: %s", serial, exc)
                self._drop(serial)
                continue
            unit = make_unit(serial, props, self.settings.profiles)
            if not unit.profile:
                log.warning("android: %s", unit.properties["hint"])
            units.append(unit)
        return units

    def health(self, unit: DeviceUnit) -> Health:
        try:
            return Health(up=True, thermal=self._thermal(self._conn(unit.serial)))
        except DeviceError as exc:
            return Health(up=False, reason=str(exc))

    def close(self) -> None:
        for serial in list(self._connections):
            self._drop(serial)

    # -- jobs --------------------------------------------------------------------------------
    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        profile = self._profile(unit)
        if request.generation is not None:  # android/generate_job.py
            self._generations.prepare(self._conn(unit.serial), unit, profile, request)
            return
        if request.target.runtime in SESSION_RUNTIMES and profile.supports(request.target):
            # a session runtime's job: edge_runner.py under the unit's python3 (android/edge_jobs.py)
            cache = PushCache(self._conn(unit.serial), self._paths, self._cache_limit)
            self._staged[self._key(unit, request)] = stage_edge(
                cache, unit.name, request, runner_kind=self._runner_kind(profile), python_kind=FARM_RUNNER
            )
            return
        if request.target.runtime != "ort" or not profile.supports(request.target):
            raise UsageError(f"{unit.name} does not run {request.target}")
        if not request.artifact.is_file():
            raise DeviceError(f"{unit.name}: artifact {request.artifact} is not a file")
        cache = PushCache(self._conn(unit.serial), self._paths, self._cache_limit)
        # with external data files: one folder entry of the model and its data (android/model_item.py)
        model = model_item(request.artifact, request.artifact_sha256)
        kind = self._runner_kind(profile)
        with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
            if kind == NATIVE:
                staged = self._stage_native(cache, model, unit, profile, request, Path(tmp))
            elif kind == FARM_RUNNER:
                inputs_path = Path(tmp) / "inputs.npz"
                arrays: dict[str, Any] = dict(request.inputs)
                np.savez(inputs_path, **arrays)
                items = [model, describe(inputs_path), describe(Path(__file__).with_name(FARM_RUNNER_NAME))]
                paths = cache.ensure(items)
                staged = StagedJob(
                    model=model_on_unit(model, paths[0]), inputs=paths[1], runner_script=paths[2]
                )
            else:
                files = write_test_data(request.inputs, Path(tmp))
                items = [model, *(describe(f, f"input_{i}.pb") for i, f in enumerate(files))]
                paths = cache.ensure(items)
                staged = StagedJob(
                    model=model_on_unit(model, paths[0]),
                    test_data=tuple(paths[1:]),
                    model_data=model_data_names(model),
                )
        self._staged[self._key(unit, request)] = staged

    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        if request.generation is not None:
            return self._generate(unit, request)
        return self._run(unit, request, with_energy=True)

    def measure_session(self, unit: DeviceUnit, request: RunRequest) -> list[float]:
        if request.generation is not None:  # a fresh runner process: its per-token decode latencies
            return self._generate(unit, request).samples_ms
        # a repeat measures latency only: the first session's energy figure is the job's
        repeat = dataclasses.replace(request, profile_ops=False, repeats=1)
        return self._run(unit, repeat, with_energy=False).samples_ms

    def _generate(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        conn = self._conn(unit.serial)
        return self._generations.run(
            conn, unit, self._profile(unit), request,
            thermal=lambda: self._thermal(conn),
            check_cancelled=lambda: self.cancellation.check(unit.serial),
        )  # fmt: skip

    def _run(self, unit: DeviceUnit, request: RunRequest, with_energy: bool) -> DeviceRun:
        key = self._key(unit, request)
        if key not in self._staged:
            self.prepare(unit, request)
        staged = self._staged.pop(key)
        profile = self._profile(unit)
        conn = self._conn(unit.serial)
        limits = profile.thermal

        def thermal_unless_cancelled() -> Thermal:
            self.cancellation.check(unit.serial)  # the wait for a cool unit may take minutes
            return self._thermal(conn) or Thermal(status="unknown")

        before = wait_until_cool(
            thermal_unless_cancelled,
            limits.max_start_temperature_c,
            limits.cooldown_deadline_s,
        )
        job_dir = self._paths.job(f"{request.artifact_sha256[:12]}-{uuid.uuid4().hex[:8]}")
        kind = self._runner_kind(profile)
        options = provider_options(profile.runner.get(f"options_{request.target.backend}", ""))
        battery: BatteryState | None = None
        if kind == NATIVE and with_energy and self._energy.idle_s > 0:
            battery = parse_probe(conn.shell(probe_command(self._energy.battery_dir)).output)
        sample = battery is not None and not battery.absence(self._energy.battery_dir)
        try:
            if request.target.runtime in SESSION_RUNTIMES:
                python = profile.runner.get("python", "python3")
                result = EdgeRunner(conn, python).run(staged, request, job_dir)
            elif kind == NATIVE:
                command = NativeCommand(
                    staged.runner_binary,
                    staged.runtime_library.rsplit("/", 1)[0],
                    qnn_lib_dir=profile.runner.get("qnn_lib_dir", "")
                    if request.target.backend == "qnn"
                    else "",
                    ep_library=profile.runner.get("qnn_ep_library", ""),
                )
                result = NativeRunner(conn, command, ep_options(options)).run(
                    staged.model, staged.input_files, request, job_dir, self._energy if sample else None
                )
            elif kind == FARM_RUNNER:
                result = FarmRunner(conn, profile.runner.get("python", "python3")).run(
                    staged, request, job_dir
                )
            else:
                flags = perf_test_options(request.target.backend, options)
                perf_test = PerfTestRunner(conn, profile.runner.get("path", DEFAULT_PERF_TEST_PATH), flags)
                result = perf_test.run(staged, request, job_dir)
        finally:
            self._cleanup(conn, job_dir)
        if result.controls:
            self._applied[key] = dict(result.controls)
        else:
            result.controls = self.session_controls(unit, request)
        if with_energy:
            result.energy = self._energy_outcome(kind, battery, result.energy)
        result.thermal_before = before if before.temperatures_c else None
        try:
            result.thermal_after = self._thermal(conn)
        except DeviceError as exc:
            # The measurements are already here; a link lost now should not throw them away.
            result.notes.append(f"no thermal reading after the run: {exc}")
        return result

    def session_controls(self, unit: DeviceUnit, request: RunRequest) -> dict[str, str]:
        """What the native runner reported applying in the last session of `request` on `unit`,
        else what each runner kind can apply of what `request` asks."""
        applied = self._applied.get(self._key(unit, request))
        if applied is not None:
            return dict(applied)
        kind = self._runner_kind(self._profile(unit))
        threads = str(request.intra_op_threads) if request.intra_op_threads else "runtime default"
        if kind == NATIVE:
            cpus = cpu_list(request.cpu_affinity) if request.cpu_affinity else []
            if cpus and not request.intra_op_threads:
                threads = str(len(cpus))  # the runner's default when pinned: one per pinned CPU
            return {
                "threads": threads,
                "affinity": ",".join(map(str, cpus)) if cpus else "not pinned",
                "spinning": spinning_text(request.allow_spinning),
            }
        if kind == PERF_TEST:
            return {
                "threads": threads,
                "affinity": "not controllable",
                "spinning": spinning_text(request.allow_spinning),
            }
        return super().session_controls(unit, request)

    def _energy_outcome(
        self, kind: str, battery: BatteryState | None, measured: EnergyEstimate | None
    ) -> EnergyEstimate | None:
        if kind != NATIVE:
            return EnergyEstimate(
                absent=f"the {kind} runner does not sample the battery (the native runner does)"
            )
        if battery is None:
            return None  # energy turned off (energy_idle_s: 0)
        absent = battery.absence(self._energy.battery_dir)
        if absent:
            return EnergyEstimate(absent=absent)
        if measured is None:
            return EnergyEstimate(absent="the native runner returned no energy section (an older build?)")
        return dataclasses.replace(measured, notes=(*measured.notes, *battery.notes()))

    def _stage_native(
        self,
        cache: PushCache,
        model: Cached,
        unit: DeviceUnit,
        profile: DeviceProfile,
        request: RunRequest,
        tmp: Path,
    ) -> StagedJob:
        """Push the model, one .npy per input, the runner and its library; the runner made executable."""
        build = find_build(self._native_root, unit, profile)
        inputs = []
        for index, (name, array) in enumerate(request.inputs.items()):
            path = tmp / f"input_{index}.npy"
            np.save(path, np.ascontiguousarray(array), allow_pickle=False)
            inputs.append((name, describe(path)))
        items = [
            model,
            describe(build.binary, RUNNER_BINARY),
            describe(build.library),
            *(f for _, f in inputs),
        ]
        paths = cache.ensure(items)
        # adb push keeps no mode bits worth trusting; the cache entry is complete, so chmod is safe.
        made = self._conn(unit.serial).shell(f"chmod 755 {q(paths[1])}")
        if not made.ok:
            raise DeviceError(f"{unit.name}: cannot make the native runner executable: {made.output.strip()}")
        return StagedJob(
            model=model_on_unit(model, paths[0]),
            runner_binary=paths[1],
            runtime_library=paths[2],
            input_files=tuple((name, path) for (name, _), path in zip(inputs, paths[3:], strict=True)),
        )

    # -- helpers -----------------------------------------------------------------------------
    def _serials(self) -> list[str]:
        serials = [f"tcp:{address}" for address in self.settings.adb_tcp_addresses]
        if self.settings.adb_usb:
            serials += [f"usb:{s}" for s in _usb_serials()]
        return serials

    def _conn(self, serial: str) -> AdbConnection:
        if serial not in self._connections:
            if self._signer is None:
                self._signer = load_signer(self.settings.adb_key_path)
            self._connections[serial] = AdbConnection(
                serial,
                self._signer,
                self.settings.io_timeout_s,
                cancelled=lambda: self.cancellation.cancelled(serial),
            )
        return self._connections[serial]

    def _drop(self, serial: str) -> None:
        conn = self._connections.pop(serial, None)
        if conn is not None:
            conn.close()

    def _profile(self, unit: DeviceUnit) -> DeviceProfile:
        try:
            return self.settings.profiles[unit.profile]
        except KeyError:
            raise UsageError(
                f"{unit.serial} has no device profile", hint=unit.properties.get("hint", "")
            ) from None

    @staticmethod
    def _runner_kind(profile: DeviceProfile) -> str:
        kind = profile.runner.get("kind", NATIVE)
        if kind not in RUNNER_KINDS:
            raise UsageError(
                f"profile {profile.name}: runner kind {kind!r} is not one of {', '.join(RUNNER_KINDS)}"
            )
        return kind

    @staticmethod
    def _key(unit: DeviceUnit, request: RunRequest) -> tuple[str, str, str]:
        return (unit.serial, request.artifact_sha256, request.target.name)

    def _thermal(self, conn: AdbConnection) -> Thermal | None:
        text = conn.shell(_THERMAL_COMMAND).output
        thermal_text, mark, battery_text = text.partition(_BATTERY_MARK)
        if mark and "Thermal Status" in thermal_text:
            return with_battery(parse_thermalservice(thermal_text), battery_text)
        thermal = with_battery(Thermal(status="unknown"), battery_text) if mark else parse_sysfs_zones(text)
        return thermal if thermal.temperatures_c or thermal.battery_pct is not None else None

    def _cleanup(self, conn: AdbConnection, job_dir: str) -> None:
        # When the link is gone the directory stays; every job starts in a fresh one anyway.
        with contextlib.suppress(DeviceLostError, DeviceTimeoutError):
            conn.shell(f"rm -rf {q(job_dir)}")


def _usb_serials() -> list[str]:
    try:
        from adb_shell.transport.usb_transport import UsbTransport
    except ImportError:
        log.warning("android: USB scanning needs `pip install 'adb-shell[usb]'`")
        return []
    try:
        return [str(t.serial_number) for t in UsbTransport.find_all_adb_devices()]
    except Exception as exc:  # libusb errors have no common base worth naming here
        log.warning("android: USB scan failed: %s", exc)
        return []
