"""The host's NVIDIA GPU as a device: is it usable, and with which CUDA provider settings.

`onnxruntime` and `onnxruntime-gpu` are two wheels of one package: only the GPU wheel has the
CUDA provider, and listing it in `get_available_providers()` says only that the wheel is
installed. Whether the CUDA and cuDNN libraries load and a GPU answers shows when a session is
created, so availability is decided by creating one on a one-node model with CPU fallback off.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.host.native_log import captured_native_log
from farm.analysis.ort_log import provider_load_failure

CUDA_PROVIDER = "CUDAExecutionProvider"
INSTALL_HINT = "pip install 'farm[cuda]'"
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


def installed_runtime_wheels() -> list[str]:
    """The distributions that provide the `onnxruntime` module: more than one shadow each other."""
    from importlib import metadata

    names = ("onnxruntime", "onnxruntime-gpu")
    found = []
    for name in names:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


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


def cuda_availability(options: CudaOptions | None = None) -> CudaAvailability:
    """Whether a CUDA session can be created here, and if not, why (in words a user can act on)."""
    import onnxruntime as ort

    options = options or CudaOptions()
    version = str(ort.__version__)
    wheels = installed_runtime_wheels()
    if len(wheels) > 1:
        return CudaAvailability(
            False,
            f"both {' and '.join(wheels)} are installed and overwrite each other's files: "
            "pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu",
        )
    if CUDA_PROVIDER not in ort.get_available_providers():
        return CudaAvailability(
            False, f"onnxruntime {version} has no {CUDA_PROVIDER} (the CPU-only wheel); {INSTALL_HINT}"
        )
    load_cuda_libraries()
    session_options = ort.SessionOptions()
    session_options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    with tempfile.TemporaryDirectory(prefix="farm-cuda-") as tmp, captured_native_log() as log:
        model = _one_node_model(Path(tmp))
        try:
            session = ort.InferenceSession(
                str(model), session_options, providers=[(CUDA_PROVIDER, options.provider_options())]
            )
            providers = list(session.get_providers())
        except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
            providers = []
            error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        else:
            error = ""
    if providers[:1] == [CUDA_PROVIDER]:
        details = {"onnxruntime": version, "cuda_device_id": str(options.device_id)}
        return CudaAvailability(True, details=details)
    why = provider_load_failure(log.text) or error or f"the session ran on {providers or 'nothing'}"
    return CudaAvailability(False, f"{CUDA_PROVIDER} is installed but cannot start: {why}")
