"""A submission that came over HTTP, run by `farm serve` itself on its own fleet: the same
checks, compile, reference, schedule and store as an embedded `farm submit`, with the progress
sent back as events instead of printed, and a stop when the submitter goes away."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.api.admission import CompileSlots
from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.api.wire import (
    EVENT_DONE,
    EVENT_JOB_FINISHED,
    EVENT_JOBS_STARTED,
    EVENT_STAGE,
    STORE_READS,
    SubmissionBody,
    error_event,
    event_line,
)
from ondevice_farm.config import FarmHome
from ondevice_farm.errors import FarmError, JobCancelledError, UsageError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.store import RunRow
from ondevice_farm_agents.base import AgentSettings

log = logging.getLogger(__name__)

Emit = Callable[[bytes], None]


def _plain(value: Any) -> Any:
    return dataclasses.asdict(value) if isinstance(value, RunRow) else value


class StreamedProgress:
    """Progress as events; a stage begun after the submitter left is not begun (compiles and
    references cannot be cut short, but nothing new starts for nobody)."""

    def __init__(self, emit: Emit, stop: threading.Event) -> None:
        self.emit = emit
        self.stop = stop

    def _check(self) -> None:
        if self.stop.is_set():
            raise JobCancelledError("the submission was cancelled: its submitter went away")

    def stage(self, text: str) -> None:
        self._check()
        self.emit(event_line(EVENT_STAGE, text=text))

    def jobs_started(self, total: int) -> None:
        self._check()
        self.emit(event_line(EVENT_JOBS_STARTED, total=total))

    def job_finished(self, job: dict[str, Any]) -> None:
        self.emit(event_line(EVENT_JOB_FINISHED, job=job))


@dataclass
class SubmissionService:
    """What `farm serve` needs to run a submission: its fleet, its farm directory and its view of
    the device profiles (the controller's, not the submitter's)."""

    fleet: Any
    home: FarmHome
    profiles: dict[str, DeviceProfile]
    settings: AgentSettings
    blobs: BlobStore
    #: compiles at once, shared by every submission of the API (api/admission.py)
    compile_slots: CompileSlots = field(default_factory=CompileSlots)

    def run(self, body: SubmissionBody, emit: Emit, stop: threading.Event) -> None:
        """Run `body`, emitting its events; ends with one `done` or one `error` event."""
        began = time.monotonic()
        try:
            document = self._run(body, emit, stop)
        except FarmError as exc:
            log.info("submission of %s ended: %s", body.model.name, exc.message)
            emit(error_event(exc))
            return
        except Exception as exc:  # a bug: the submitter hears of it in one line, the log has it all
            log.exception("submission of %s failed", body.model.name)
            emit(error_event(FarmError(f"the controller failed the submission: {type(exc).__name__}: {exc}")))
            return
        log.info(
            "run %s (%s, %d job(s)) %s in %.2f s",
            document["run_id"], body.model.name, len(document["jobs"]), document["status"],
            time.monotonic() - began,
        )  # fmt: skip
        # each job went out as a summary as it finished; the end carries the run with its jobs whole
        # (one model's devices x targets, read back from the store), what the report prints
        emit(event_line(EVENT_DONE, document=document))

    def read_store(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """One read of the fleet's store, as `farm runs/show/report --address` make through Ray;
        a run row as a plain object."""
        from ondevice_farm.controller.results import ControllerStore

        if method not in STORE_READS:
            raise UsageError(
                f"the submit API reads the store with {', '.join(sorted(STORE_READS))}, not {method!r}"
            )
        result = getattr(ControllerStore(self.fleet), method)(*args, **kwargs)
        if isinstance(result, list):
            return [_plain(r) for r in result]
        return _plain(result)

    def cancel_run(self, run: str) -> dict[str, Any]:
        """`farm cancel RUN --address http://...`: as through Ray."""
        from ondevice_farm.controller.client import cancel_run

        run_id, left = cancel_run(self.fleet, run)
        return {"run_id": run_id, "left": left}

    def _run(self, body: SubmissionBody, emit: Emit, stop: threading.Event) -> dict[str, Any]:
        from ondevice_farm.controller.client import FleetClient
        from ondevice_farm.controller.pipeline import check_requests, submit_on
        from ondevice_farm.controller.submission import with_home_caches

        def local(ref: Any) -> Any:
            if ref is not None and ref.external_data:  # the model beside its data files
                return self.blobs.path(ref.sha256, f"{ref.name}.with-data", tree=True) / ref.name
            return None if ref is None else self.blobs.path(ref.sha256, ref.name, tree=ref.tree)

        request = body.options.request(local(body.model), local(body.inputs_npz), local(body.reference_model))
        request = with_home_caches(request, self.home)
        [checked], _ = check_requests([request], self.profiles, self.settings)
        progress = StreamedProgress(emit, stop)
        client = FleetClient(fleet=self.fleet, embedded=False, stop=stop)
        return submit_on(
            client,
            request,
            checked,
            home=self.home,
            profiles=self.profiles,
            progress=progress,
            compile_slot=self.compile_slots.held(progress, stop),
        )
