"""What it takes to turn a finished job into its stored document, carried once with the
submission so the process that owns the store builds the document where the result arrives
(docs/architecture.md, "Where a job's result goes"); the fleet builds it in
`ondevice_farm.controller.job_writer`. Value types only: the fleet imports them at its start.

A `ModelContext` is shared by every job of one model: its reference outputs cross Ray once per
submission (pickle keeps one copy of an object that many contexts share), not once per job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ondevice_farm.analysis.tolerance import Tolerance
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.errors import FarmError
from ondevice_farm_agents.base import DeviceRun

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class ModelContext:
    """One model's part of every job document: the host reference and where it came from."""

    reference: dict[str, np.ndarray]
    reference_model: dict[str, Any] | None
    #: the model's dynamic dims that no `--shape` pinned and the sizes they ran at, with the
    #: `--shape` that pins them (`inputs.UnpinnedDims.note`): said where a job fails; "" if none
    shape_note: str = ""


@dataclass(frozen=True, eq=False)
class JobContext:
    """One job's document before it ran: ids, model, device and target (`base`), its artifact and
    tolerance; the model's part is shared."""

    base: dict[str, Any]
    artifact: CompiledArtifact
    tolerance: Tolerance
    model: ModelContext


@dataclass(frozen=True)
class RunWriting:
    """A submission's jobs to be written into run `run_id` of the fleet's store as they finish."""

    run_id: str
    contexts: dict[str, JobContext]


@dataclass
class JobEnd:
    """How a job ended, as the fleet saw it: the unit's run, or the error it ended with."""

    queued_at: float | None
    started_at: float | None
    finished_at: float | None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    unit: str | None = None
    run: DeviceRun | None = None
    error: FarmError | None = None
    message: str = ""
