"""`submit`: a model to devices and targets, measured, as a `Run`. The one submit path: `farm
submit` calls `submit_document` with its parsed options; Python calls `submit`.

Where it runs: a controller's submit API (`http://HOST:PORT`: no Ray here), the `farm serve` this
farm directory records when it is up, a controller's Ray address, or an embedded local Ray."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm.api.wire import SubmitOptions, is_api_address
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.errors import UsageError
from ondevice_farm.progress import Progress
from ondevice_farm.python_api.notebook import LineProgress
from ondevice_farm.python_api.place import Farm
from ondevice_farm.python_api.values import Run

if TYPE_CHECKING:
    from ondevice_farm.api.client import ApiTarget

#: a model given as a path, an ONNX `ModelProto` or a `torch.export` `ExportedProgram`
ModelLike = Any
Say = Callable[[str], None]


def _quiet(text: str) -> None:
    pass


def submit(
    model: ModelLike,
    *,
    devices: str | Sequence[str] = "host-cpu",
    targets: str | Sequence[str] | None = None,
    runs: int = DEFAULT_TIMED_RUNS,
    warmup: int = DEFAULT_WARMUP_RUNS,
    repeats: int = DEFAULT_REPEATS,
    shapes: Mapping[str, Sequence[int]] | Sequence[str] = (),
    inputs: str | Path | None = None,
    seed: int = DEFAULT_SEED,
    threads: int | None = None,
    tolerances: Sequence[str] = (),
    reference: str | Path | None = None,
    profile_ops: bool = True,
    coreml_precision: str = "fp16",
    coreml_quantization: str = "keep",
    fixes: Sequence[str] = (),
    attempts: int = DEFAULT_MAX_ATTEMPTS,
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S,
    sustained: str | None = None,
    sustained_window_s: float = DEFAULT_SUSTAINED_WINDOW_S,
    generate: str | None = None,
    farm: Farm | None = None,
    address: str | None = None,
    progress: Progress | None = None,
) -> Run:
    """Compile `model` per target, run it on `devices`, and return the stored run.

    The keywords are `farm submit`'s options under their Python names, with its defaults;
    `shapes` takes `{"input": (1, 3, 224, 224)}` or `["input=1x3x224x224"]`. Errors are the CLI's
    (`ondevice_farm.FarmError` and its tree). Interrupting (Ctrl-C, a kernel interrupt) cancels
    the run's jobs on their units, as Ctrl-C on `farm submit` does."""
    options = SubmitOptions(
        devices=_joined(devices),
        targets=None if targets is None else _joined(targets),
        runs=runs,
        warmup=warmup,
        repeats=repeats,
        shapes=shape_texts(shapes),
        seed=seed,
        threads=threads,
        tolerances=tuple(tolerances),
        profile_ops=profile_ops,
        coreml_precision=coreml_precision,
        coreml_quantization=coreml_quantization,
        attempts=attempts,
        placement_deadline_s=placement_deadline_s,
        sustained=sustained,
        sustained_window_s=sustained_window_s,
        generate=generate,
        fixes=tuple(fixes),
    )
    place = (farm or Farm()).with_address(address)
    with model_file(model) as path:
        document = submit_document(
            path,
            options,
            place,
            inputs_npz=None if inputs is None else Path(inputs),
            reference_model=None if reference is None else Path(reference),
            progress=progress or LineProgress(),
        )
    return Run.of(document)


def submit_document(
    model: Path,
    options: SubmitOptions,
    farm: Farm,
    *,
    inputs_npz: Path | None = None,
    reference_model: Path | None = None,
    progress: Progress,
    say: Say = _quiet,
) -> dict[str, Any]:
    """The run document of one submission, wherever `farm` says it runs (`say`: one-line notes
    on where it went, as `farm submit` prints them)."""
    address = farm.address
    if farm.embedded and address is not None:
        raise UsageError(
            "--embedded runs the submission here; --address (or $RAY_ADDRESS) sends it to a controller",
            hint="give one of them",
        )
    if is_api_address(address):
        assert address is not None
        if farm.adb:
            raise UsageError(
                "--adb attaches units to an embedded fleet; a controller's units are its agents'",
                hint="run `farm agent` on the host the phone is attached to",
            )
        from ondevice_farm.api.client import target_for

        return _over_api(target_for(address), model, options, progress, inputs_npz, reference_model)
    if address is None and not farm.embedded and not farm.adb and (local := local_controller(farm, say)):
        return _over_api(local, model, options, progress, inputs_npz, reference_model)
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.controller.pipeline import submit as run_submit

    request = options.request(model, inputs_npz, reference_model)
    profiles, settings = farm.fleet()
    return run_submit(
        request,
        home=farm.farm_home,
        profiles=profiles,
        settings=settings,
        cluster=ClusterConfig(address=address),
        progress=progress,
        store=farm.store_location,
    )


def local_controller(farm: Farm, say: Say) -> ApiTarget | None:
    """The `farm serve` this farm directory records, when it is up and takes this host's token
    (said in one line, as is a record that cannot be used); None: run embedded."""
    from ondevice_farm.api.local_controller import CONTROLLER_FILE, find_local_controller, local_token

    record = farm.farm_home.root / CONTROLLER_FILE
    if not record.exists():
        return None
    try:
        token = local_token()
    except OSError as exc:
        say(
            f"farm: cannot read this host's Ray token ({exc.strerror}) for the farm controller in {record}: "
            "running here, with an embedded Ray"
        )
        return None
    found = find_local_controller(
        record,
        farm.store_location,
        token,
        profiles_dir=Path(farm.profiles_dir) if farm.profiles_dir is not None else _default_profiles_dir(),
    )
    if found.controller is None:
        if found.why_not:
            say(f"farm: {found.why_not}")
        return None
    from ondevice_farm.api.client import ApiTarget

    say(
        f"farm: submitting to the farm controller at {found.controller.url} (`farm serve`, pid "
        f"{found.controller.pid}); --embedded runs it here instead"
    )
    return ApiTarget(url=found.controller.url, token=token)


def _default_profiles_dir() -> Path:
    from ondevice_farm.profiles import DEFAULT_PROFILES_DIR

    return DEFAULT_PROFILES_DIR


def _over_api(
    target: ApiTarget,
    model: Path,
    options: SubmitOptions,
    progress: Progress,
    inputs_npz: Path | None,
    reference_model: Path | None,
) -> dict[str, Any]:
    """To a running `farm serve`'s submit API: no Ray here, the controller does the work."""
    from ondevice_farm.api.client import submit_over_api
    from ondevice_farm.controller.cluster import sigterm_as_interrupt

    # SIGTERM ends it as Ctrl-C does: the connection closes, the controller cancels
    with sigterm_as_interrupt():
        return submit_over_api(target, model, options, progress, inputs_npz, reference_model)


def _joined(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else ",".join(value)


def shape_texts(shapes: Mapping[str, Sequence[int]] | Sequence[str]) -> tuple[str, ...]:
    """`{"x": (1, 3)}` or `["x=1x3"]` as `--shape` takes them."""
    if isinstance(shapes, Mapping):
        return tuple(f"{name}={'x'.join(str(int(d)) for d in dims)}" for name, dims in shapes.items())
    if isinstance(shapes, str):
        return (shapes,)
    return tuple(shapes)


@contextmanager
def model_file(model: ModelLike) -> Iterator[Path]:
    """A path for what was given: a path as it is; an ONNX `ModelProto` or a `torch.export`
    program written to a scratch folder for the length of the call (named after the graph)."""
    if isinstance(model, str | Path):
        yield Path(model)
        return
    kind = type(model).__name__
    with tempfile.TemporaryDirectory(prefix="farm-model-") as scratch:
        if kind == "ModelProto":
            import onnx

            path = Path(scratch) / f"{model.graph.name or 'model'}.onnx"
            onnx.save(model, str(path))
        elif kind == "ExportedProgram":
            import torch

            path = Path(scratch) / "model.pt2"
            torch.export.save(model, str(path))
        else:
            raise UsageError(
                f"cannot submit a {kind}: give a path, an onnx.ModelProto or a torch.export.ExportedProgram"
            )
        yield path
