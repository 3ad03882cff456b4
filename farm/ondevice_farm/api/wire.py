"""What a thin submitter and `farm serve` say to each other over HTTP.

Files go first, each once, by content hash (`PUT /v1/blobs/SHA256`; `HEAD` asks whether the
controller has it already), then `POST /v1/submissions` with the options as the command line gave
them. The answer streams: one JSON object a line (`EVENT_*`), ending with `done` (the run's
document) or `error` (the FarmError, by name, with its message and hint). The options are
parsed on the controller, by the same code as an embedded submit, so both check alike.

This module is imported by the thin client: it stays free of numpy, onnx and Ray.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm import errors
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.errors import FarmError, UsageError

if TYPE_CHECKING:
    from ondevice_farm.controller.submit_request import SubmitRequest
    from ondevice_farm.generate.spec import GenerateSpec, PromptSource

API_VERSION = 1
BLOBS_PATH = "/v1/blobs/"
SUBMISSIONS_PATH = "/v1/submissions"
#: `POST` {"method", "args", "kwargs"}: one read of the controller's results store
STORE_PATH = "/v1/store"
#: `POST` {"run": RUN}: `farm cancel RUN`; answers {"result": {"run_id", "left"}} or {"error"}
CANCEL_PATH = "/v1/cancel"
#: what a submitter may read through the API: the store methods `farm runs/show/report` use
STORE_READS = frozenset(
    {"runs", "run", "resolve_run_id", "jobs", "job_counts", "run_job_summaries", "run_job_rows", "job"}
)
#: where `farm serve` takes submissions unless told otherwise (its /metrics default is 9477)
DEFAULT_API_HOST = "127.0.0.1"
DEFAULT_API_PORT = 9478
#: a line the controller writes while nothing else happens, so a silent network is noticed
HEARTBEAT_S = 10.0
#: a submitter that hears nothing (not even a heartbeat) for this long gives the controller up
DEFAULT_SILENCE_TIMEOUT_S = 60.0
NDJSON = "application/x-ndjson"

EVENT_STAGE = "stage"
EVENT_JOBS_STARTED = "jobs_started"
EVENT_JOB_FINISHED = "job_finished"
EVENT_HEARTBEAT = "heartbeat"
EVENT_DONE = "done"
EVENT_ERROR = "error"


def is_api_address(address: str | None) -> bool:
    """`http://HOST:PORT`: a controller's submit API; anything else is a Ray address."""
    return address is not None and address.startswith(("http://", "https://"))


@dataclass(frozen=True)
class FileRef:
    """A file the submission names, uploaded under its sha256; `name` keeps what the user called it
    (a model's name is its file's stem, a checkpoint is told by its suffix). `tree`: a directory (an
    ONNX Runtime GenAI folder, an .mlpackage), uploaded as one tar (`write_tree_tar`) whose bytes
    `sha256` is of, unpacked on the controller under `name`. `external_data`: an ONNX model and its
    external data files, one tar (`write_model_tar`) unpacked into a folder of their own, the
    model `name` in it."""

    name: str
    sha256: str
    tree: bool = False
    external_data: bool = False

    def to_json(self) -> dict[str, Any]:
        flags = {"tree": self.tree, "external_data": self.external_data}
        return {"name": self.name, "sha256": self.sha256, **{k: True for k, v in flags.items() if v}}

    @classmethod
    def from_json(cls, value: Any) -> FileRef:
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            raise UsageError("a submission's file reference needs a name and a sha256")
        name, digest = value["name"], value.get("sha256")
        if Path(name).name != name or name in ("", ".", ".."):
            raise UsageError(f"a submitted file's name must be a plain file name, not {name!r}")
        if (
            not isinstance(digest, str)
            or len(digest) != 64
            or not all(c in "0123456789abcdef" for c in digest)
        ):
            raise UsageError(f"{name}: not a sha256: {digest!r}")
        return cls(name, digest, value.get("tree") is True, value.get("external_data") is True)


@dataclass(frozen=True)
class SubmitOptions:
    """`farm submit`'s options as typed: one value object for an embedded submit, a Ray-client
    submit and one sent over HTTP (`request` parses them, wherever the submission runs)."""

    devices: str = "host-cpu"
    targets: str | None = None
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    repeats: int = DEFAULT_REPEATS
    shapes: tuple[str, ...] = ()
    seed: int = DEFAULT_SEED
    threads: int | None = None
    tolerances: tuple[str, ...] = ()
    profile_ops: bool = True
    coreml_precision: str = "fp16"
    coreml_quantization: str = "keep"
    attempts: int = DEFAULT_MAX_ATTEMPTS
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S
    sustained: str | None = None
    sustained_window_s: float = DEFAULT_SUSTAINED_WINDOW_S
    #: `--generate prompt=64,decode=32`: a generation job on an ONNX Runtime GenAI folder
    generate: str | None = None
    #: `--prompt-file`: its name (a `.json` one holds token ids) and its content, sent inline
    prompt_file_name: str | None = None
    prompt_file_text: str | None = None
    #: `--fix NAME=VALUE` / `--fix NAME` as typed: scalar inputs pinned in the whole run
    fixes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, value: Any) -> SubmitOptions:
        if not isinstance(value, dict):
            raise UsageError("a submission's options must be a JSON object")
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise UsageError(
                f"unknown submission option(s): {', '.join(unknown)}",
                hint="the submitter is newer than this controller: upgrade `farm serve`",
            )
        defaults = cls()
        return cls(**{name: _typed(name, given, getattr(defaults, name)) for name, given in value.items()})

    def request(
        self, model: Path, inputs_npz: Path | None = None, reference_model: Path | None = None
    ) -> SubmitRequest:
        """The checked request (UsageError on a bad option), as `farm submit` builds it."""
        from ondevice_farm.analysis.tolerance import parse_tolerance
        from ondevice_farm.controller.submit_request import SubmitRequest
        from ondevice_farm.durations import parse_duration_s
        from ondevice_farm.inputs import parse_shapes
        from ondevice_farm.targets import parse_targets

        if self.sustained_window_s < 0.1:
            raise UsageError("--sustained-window must be at least 0.1 s")
        generate, prompt = self._generation()
        return SubmitRequest(
            model_path=model,
            devices=self.devices,
            targets=parse_targets(self.targets),
            runs=self.runs,
            warmup=self.warmup,
            repeats=self.repeats,
            shapes=parse_shapes(self.shapes),
            inputs_npz=inputs_npz,
            seed=self.seed,
            tolerance=parse_tolerance(self.tolerances) or None,
            reference_model=reference_model,
            intra_op_threads=self.threads,
            profile_ops=self.profile_ops,
            coreml_precision=self.coreml_precision,
            coreml_quantization=self.coreml_quantization,
            max_attempts=self.attempts,
            placement_deadline_s=self.placement_deadline_s,
            sustained_s=parse_duration_s(self.sustained) if self.sustained else 0.0,
            sustained_window_s=self.sustained_window_s,
            generate=generate,
            prompt=prompt,
            fixed_inputs=self._fixed_inputs(inputs_npz),
        )

    def _fixed_inputs(self, inputs_npz: Path | None) -> dict[str, float | None]:
        """`--fix` parsed; `--fix NAME` alone (None) is given its value from --inputs by `prepare`."""
        if not self.fixes:  # the lowering's package is not imported for a run that pins nothing
            return {}
        from ondevice_farm.runtimes.coreml.compile.pinning import FIX_HINT, parse_fixes

        fixed = parse_fixes(self.fixes)
        if inputs_npz is None and None in fixed.values():
            name = next(n for n, v in fixed.items() if v is None)
            raise UsageError(
                f"--fix {name} has no value and no --inputs file gives it; use --fix NAME=VALUE",
                hint=FIX_HINT,
            )
        return fixed

    def _generation(self) -> tuple[GenerateSpec | None, PromptSource | None]:
        from ondevice_farm.generate.spec import PromptSource, parse_generate

        from_file = self.prompt_file_text is not None
        if self.generate is None:
            if from_file:
                raise UsageError("--prompt-file gives a generation job's prompt: add --generate")
            return None, None
        spec = parse_generate(self.generate, prompt_from_file=from_file)
        if self.prompt_file_text is None:
            return spec, None
        name = self.prompt_file_name or "--prompt-file"
        return spec, PromptSource(self.prompt_file_text, name.endswith(".json"), name)


def _typed(name: str, given: Any, default: Any) -> Any:
    """`given` checked against the type of the option's default (JSON has no tuples, ints are floats)."""
    if isinstance(default, bool):
        ok = isinstance(given, bool)
    elif isinstance(default, tuple):
        ok = isinstance(given, list) and all(isinstance(v, str) for v in given)
        given = tuple(given) if ok else given
    elif isinstance(default, float):
        ok = isinstance(given, (int, float)) and not isinstance(given, bool)
        given = float(given) if ok else given
    elif isinstance(default, int):
        ok = isinstance(given, int) and not isinstance(given, bool)
    elif default is None:  # optional: str or int options default to None
        ok = given is None or (isinstance(given, (str, int)) and not isinstance(given, bool))
    else:
        ok = isinstance(given, type(default))
    if not ok:
        raise UsageError(f"submission option {name}: {given!r} is not a {type(default).__name__}")
    return given


@dataclass(frozen=True)
class SubmissionBody:
    """`POST /v1/submissions`."""

    model: FileRef
    options: SubmitOptions = field(default_factory=SubmitOptions)
    inputs_npz: FileRef | None = None
    reference_model: FileRef | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "api_version": API_VERSION,
            "model": self.model.to_json(),
            "options": self.options.to_json(),
            "inputs_npz": None if self.inputs_npz is None else self.inputs_npz.to_json(),
            "reference_model": None if self.reference_model is None else self.reference_model.to_json(),
        }

    @classmethod
    def from_json(cls, value: Any) -> SubmissionBody:
        if not isinstance(value, dict):
            raise UsageError("a submission must be a JSON object")
        if value.get("api_version") != API_VERSION:
            raise UsageError(
                f"this controller speaks submit API {API_VERSION}, the submitter {value.get('api_version')}",
                hint="run the same farm version on the submitter and the controller",
            )
        optional = {
            k: FileRef.from_json(value[k]) if value.get(k) else None
            for k in ("inputs_npz", "reference_model")
        }
        return cls(
            model=FileRef.from_json(value.get("model")),
            options=SubmitOptions.from_json(value.get("options") or {}),
            **optional,
        )


FINAL_HEADS = tuple(json.dumps({"event": kind})[:-1].encode() for kind in (EVENT_DONE, EVENT_ERROR))


def is_final(line: bytes) -> bool:
    """The stream's last event (`done` or `error`), told by its head: `event_line` writes the kind first."""
    return line.startswith(FINAL_HEADS)


def error_json(exc: FarmError) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}


def event_line(kind: str, **fields: Any) -> bytes:
    from ondevice_farm.json_values import json_default

    return (json.dumps({"event": kind, **fields}, default=json_default) + "\n").encode()


def error_event(exc: FarmError) -> bytes:
    return event_line(EVENT_ERROR, **error_json(exc))


def error_from_event(event: dict[str, Any]) -> FarmError:
    """The controller's error as the same FarmError here: its exit code and hint come with it."""
    cls = getattr(errors, str(event.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, FarmError)):
        cls = FarmError
    return cls(str(event.get("message") or "the controller failed the submission"), hint=event.get("hint"))
