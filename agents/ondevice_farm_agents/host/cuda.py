"""The host's NVIDIA GPU as a device: is it usable, and with which CUDA provider settings.

`onnxruntime` and `onnxruntime-gpu` are two wheels of one package: only the GPU wheel has the
CUDA provider, and listing it in `get_available_providers()` says only that the wheel is
installed. Whether the CUDA and cuDNN libraries load and a GPU answers shows when a session is
created, so availability is decided by creating one on a one-node model with CPU fallback off.
Two installed distributions of the module are named in the reason only when that fails: one
that the imported module shadows is harmless.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.ort_log import provider_load_failure
from ondevice_farm.errors import install_hint
from ondevice_farm_agents.host.fallback_probe import DISABLE_CPU_FALLBACK
from ondevice_farm_agents.host.native_log import captured_native_log

CUDA_PROVIDER = "CUDAExecutionProvider"
INSTALL_HINT = install_hint("cuda")
DEFAULT_DEVICE_ID = 0
DEFAULT_USE_TF32 = True

#: `AgentSettings.extra` keys (set at the CLI edge, e.g. from FARM_CUDA_* variables)
EXTRA_DEVICE_ID = "cuda_device_id"
EXTRA_USE_TF32 = "cuda_use_tf32"
EXTRA_IO_BINDING = "cuda_io_binding"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class CudaOptions:
    device_id: int = DEFAULT_DEVICE_ID
    #: TF32 tensor-core math for fp32 MatMul/Conv on Ampere and newer (ORT's default: on)
    use_tf32: bool = DEFAULT_USE_TF32
    #: keep inputs and outputs on the GPU across timed runs (no host copies in the timing)
    io_binding: bool = False

    @classmethod
    def from_extra(cls, extra: dict[str, str]) -> CudaOptions:
        return cls(
            device_id=int(extra.get(EXTRA_DEVICE_ID, DEFAULT_DEVICE_ID)),
            use_tf32=extra.get(EXTRA_USE_TF32, "1").strip().lower() in _TRUE,
            io_binding=extra.get(EXTRA_IO_BINDING, "0").strip().lower() in _TRUE,
        )

    def provider_options(self) -> dict[str, str]:
        return {"device_id": str(self.device_id), "use_tf32": "1" if self.use_tf32 else "0"}

    def providers(self) -> list[Any]:
        """What `InferenceSession(providers=...)` takes: CUDA with options, then the CPU."""
        return [(CUDA_PROVIDER, self.provider_options()), "CPUExecutionProvider"]


@dataclass(frozen=True)
class CudaAvailability:
    available: bool
    reason: str = ""
    #: e.g. the ORT version and device id, for the unit's properties
    details: dict[str, str] | None = None


def _one_node_model(directory: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "farm_cuda_probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = directory / "relu.onnx"
    onnx.save(model, str(path))
    return path


#: the distributions that install the `onnxruntime` module
RUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu")
REINSTALL_HINT = "pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu"


@dataclass(frozen=True)
class RuntimeWheel:
    """One installed distribution of the `onnxruntime` module, and whether it is the one imported."""

    name: str
    version: str
    location: str
    imported: bool

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.location})"


def runtime_wheels() -> list[RuntimeWheel]:
    """Every installed distribution of `onnxruntime`, first found first, as `importlib.metadata` sees them.

    Two of them can sit in one site-packages (then they overwrite each other's files) or in two
    directories of `sys.path` (then the first one's module shadows the other's, which does no harm).
    """
    from importlib import metadata

    import onnxruntime as ort

    imported = Path(str(ort.__file__)).resolve()
    found = []
    for name in RUNTIME_DISTRIBUTIONS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        init = Path(str(dist.locate_file("onnxruntime/__init__.py")))
        found.append(
            RuntimeWheel(
                name=name,
                version=dist.version,
                location=str(Path(str(dist.locate_file(""))).resolve()),
                imported=init.exists() and init.resolve() == imported,
            )
        )
    return found


def wheel_conflict(wheels: Sequence[RuntimeWheel]) -> str:
    """A clause naming the distributions of `onnxruntime` when there is more than one, else "".

    Only said where the CUDA provider is unusable: a second distribution that the imported one
    shadows breaks nothing (a GPU host with the CPU wheel in site-packages and onnxruntime-gpu
    earlier on PYTHONPATH runs CUDA sessions fine), so it is never a reason on its own.
    """
    if len(wheels) < 2:
        return ""
    imported = [w for w in wheels if w.imported]
    named = " and ".join(w.describe() for w in wheels)
    if len(imported) == 1:
        others = ", ".join(w.describe() for w in wheels if not w.imported)
        where = f"onnxruntime is imported from {imported[0].describe()}, which shadows {others}"
    elif len({w.location for w in wheels}) == 1:
        where = f"{named} are installed in one place and overwrite each other's files"
    else:
        where = f"{named} are both installed"
    return f"{where}: {REINSTALL_HINT}"


@dataclass(frozen=True)
class SessionProbe:
    """What creating a one-node CUDA session with CPU fallback off showed."""

    #: `CUDAExecutionProvider` is in `get_available_providers()` (the GPU wheel is imported)
    listed: bool
    #: the providers the session runs on; empty when it was not created
    providers: tuple[str, ...] = ()
    #: the first line of the exception, when session creation raised
    error: str = ""
    #: ORT's log of that session creation (load failures are logged, not raised)
    log: str = ""


def judge_availability(
    probe: SessionProbe, wheels: Sequence[RuntimeWheel], version: str, options: CudaOptions
) -> CudaAvailability:
    """Usable exactly when the session ran on CUDA; the wheels only explain why it did not."""
    conflict = wheel_conflict(wheels)
    if probe.listed and probe.providers[:1] == (CUDA_PROVIDER,):
        details = {"onnxruntime": version, "cuda_device_id": str(options.device_id)}
        if conflict:
            details["onnxruntime_shadowed"] = ", ".join(w.describe() for w in wheels if not w.imported)
        return CudaAvailability(True, details=details)
    if not probe.listed:
        reason = f"onnxruntime {version} has no {CUDA_PROVIDER} (the CPU-only wheel)"
        return CudaAvailability(False, f"{reason}; {conflict or INSTALL_HINT}")
    why = (
        provider_load_failure(probe.log)
        or probe.error
        or f"the session ran on {list(probe.providers) or 'nothing'}"
    )
    reason = f"{CUDA_PROVIDER} is installed but cannot start: {why}"
    return CudaAvailability(False, f"{reason}; {conflict}" if conflict else reason)


def load_cuda_libraries() -> None:
    """Let onnxruntime-gpu find CUDA/cuDNN installed as pip wheels (its `[cuda,cudnn]` extras).

    Recent onnxruntime-gpu releases have `preload_dlls`; where it is missing or fails, the system's
    own libraries must do, and session creation reports what is missing.
    """
    import onnxruntime as ort

    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        with captured_native_log():
            preload()
    except Exception:  # best effort: session creation names what is missing
        pass


def probe_cuda_session(options: CudaOptions) -> SessionProbe:
    """Create a session on a one-node model with only the CUDA provider and CPU fallback off."""
    import onnxruntime as ort

    if CUDA_PROVIDER not in ort.get_available_providers():
        return SessionProbe(listed=False)
    load_cuda_libraries()
    session_options = ort.SessionOptions()
    session_options.add_session_config_entry(DISABLE_CPU_FALLBACK, "1")
    providers: tuple[str, ...] = ()
    error = ""
    with tempfile.TemporaryDirectory(prefix="farm-cuda-") as tmp, captured_native_log() as log:
        model = _one_node_model(Path(tmp))
        try:
            session = ort.InferenceSession(
                str(model), session_options, providers=[(CUDA_PROVIDER, options.provider_options())]
            )
            providers = tuple(session.get_providers())
        except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
            error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SessionProbe(listed=True, providers=providers, error=error, log=log.text)


def cuda_availability(options: CudaOptions | None = None) -> CudaAvailability:
    """Whether a CUDA session can be created here, and if not, why (in words a user can act on)."""
    import onnxruntime as ort

    options = options or CudaOptions()
    return judge_availability(probe_cuda_session(options), runtime_wheels(), str(ort.__version__), options)
