"""What this host still tells about a target that none of the selected devices runs.

No iPhone attached does not mean nothing to learn about `coreml/ane`: the compile report comes
from `farm compile` (the lowering runs on any host) and the predicted numeric drift from
`farm diverge --predict` (the host simulates the target's precision). The hint of an unsupported
target names those commands, as written, so the user has somewhere to go.
"""

from __future__ import annotations

from ondevice_farm.targets import Target

#: ONNX Runtime accelerators that may compute in fp16, predicted as fp16 storage on the host
FP16_ORT_TARGETS = ("ort/nnapi", "ort/xnnpack", "ort/qnn", "ort/cuda")


def predicted_on_host(target: Target) -> bool:
    """`farm diverge --predict` takes it: the farm's CoreML lowering, or an fp16 ORT accelerator."""
    return (target.runtime == "coreml" and not target.route) or target.name in FP16_ORT_TARGETS


def host_commands(target: Target, model: str = "MODEL") -> str:
    """The commands that give `target`'s compile report (and, where the host predicts it, its
    drift) on this host, for the hint of a submission no selected device can run it for."""
    compile_ = f"`farm compile -t {target.name} {model}` gives its compile report on this host"
    if not predicted_on_host(target):
        return compile_
    return (
        f"{compile_}, and `farm diverge RUN --predict {target.name}` its predicted numeric drift "
        f"(RUN: a run of {model} on a device here, e.g. `latest`)"
    )
