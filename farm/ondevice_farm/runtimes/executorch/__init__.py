"""ExecuTorch: the PyTorch checkpoint lowered to a `.pte` program (`compile.py`), XNNPACK's
delegate for what its partitioner takes, the portable kernels for the rest."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_CHECKPOINT, BackendSpec, RuntimeSpec

#: the ETRecord beside the artifact: `model.pte` -> `model.pte.etrecord`
ETRECORD_SUFFIX = ".etrecord"

SPEC = RuntimeSpec(
    name="executorch",
    title="ExecuTorch",
    backends=(
        BackendSpec(
            "xnnpack", "XnnpackPartitioner", "XNNPACK's delegate, portable kernels for what it leaves"
        ),
        BackendSpec("portable", "", "ExecuTorch's portable kernels only", accelerator=False),
    ),
    source=SOURCE_CHECKPOINT,
    compiler="ondevice_farm.runtimes.executorch.compile:compile_target",
    extra="executorch",
    fallback_kernels=("portable",),
    artifact_name="model.pte",
    sidecar_suffixes=(ETRECORD_SUFFIX,),
)
