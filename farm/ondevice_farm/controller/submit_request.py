"""A submission's values: the request as asked (`SubmitRequest`) and as checked (`Prepared`).
submission.py checks the one into the other; the generation job's checks (generation.py) make a
`Prepared` too, so both import these from here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ondevice_farm.analysis.tolerance import Tolerance, ToleranceOverrides
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.model import ModelInfo
from ondevice_farm.targets import Target

if TYPE_CHECKING:
    from ondevice_farm.generate.spec import GenerateSpec, PromptSource
    from ondevice_farm.generate.trace import GenerationPlan
    from ondevice_farm.torch_source.ingest import TorchSource


@dataclass(frozen=True)
class SubmitRequest:
    model_path: Path
    devices: str
    targets: list[Target] | None = None
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    #: measurement sessions per job, each with its own warm-up and timed runs
    repeats: int = DEFAULT_REPEATS
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs_npz: Path | None = None
    seed: int = DEFAULT_SEED
    #: overrides of the per-precision defaults (--tolerance, a suite's `tolerance:`), or one
    #: Tolerance for every job
    tolerance: Tolerance | ToleranceOverrides | None = None
    #: another model with the same inputs and outputs whose host outputs are the reference
    #: (the float model of a quantised artifact); None: the submitted model itself
    reference_model: Path | None = None
    intra_op_threads: int | None = None
    profile_ops: bool = True
    coreml_precision: str = "fp16"
    #: QDQ models on CoreML: keep 8-bit weights/activations, or fold to float
    coreml_quantization: str = "keep"
    #: tries of a job whose unit disconnected or died, on other units of the profile
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: how long a job waits while no unit of its profile is up
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S
    #: a job pinned to a unit (`pixel8:SERIAL`, `pixel8:*`) whose unit is lost runs on another
    #: unit of the profile instead of failing (a suite's `units_interchangeable: true`)
    units_interchangeable: bool = False
    #: where a PyTorch checkpoint's ONNX exports and eager references are cached (FarmHome.torch)
    torch_cache: Path | None = None
    #: where models' descriptions are cached by content hash (FarmHome.models; None: not cached)
    model_cache: Path | None = None
    #: a sustained phase after the timed runs (0: none), cut into windows of this length
    sustained_s: float = 0.0
    sustained_window_s: float = DEFAULT_SUSTAINED_WINDOW_S
    #: a generation job (`--generate`): MODEL is an ONNX Runtime GenAI folder (docs/generate.md)
    generate: GenerateSpec | None = None
    #: a generation job's prompt (`--prompt-file`) instead of seeded synthetic token ids
    prompt: PromptSource | None = None
    #: `--fix`: scalar inputs pinned to a value for the whole run (the reference, every target's
    #: inputs, the CoreML lowering's constants); None: the value `inputs_npz` holds
    fixed_inputs: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Prepared:
    """A checked submission: what to run, with what, against which reference."""

    info: ModelInfo
    selectors: list[DeviceSelector]
    plan: list[tuple[DeviceSelector, Target]]
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, np.ndarray]
    #: the model whose host outputs are the reference: `info` unless --reference names another
    reference_info: ModelInfo | None = None
    #: the checkpoint, its ONNX export (or the export's refusal) and eager reference, where the
    #: source is PyTorch
    torch: TorchSource | None = None
    #: a generation job's token ids and counts (`SubmitRequest.generate`)
    generation: GenerationPlan | None = None
    #: `--fix`: each pinned input's value, also in `inputs`; the CoreML compiles fold it
    fixed_inputs: dict[str, float] = field(default_factory=dict)

    @property
    def reference_source(self) -> ModelInfo:
        return self.reference_info or self.info
