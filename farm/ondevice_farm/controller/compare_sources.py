"""What a compare runs: the two models the user named, and the same work for both of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.submit_request import Prepared
from ondevice_farm.errors import UsageError

if TYPE_CHECKING:
    from ondevice_farm.generate.spec import GenerateSpec

RUN_PREFIX = "run:"


@dataclass
class ModelSource:
    """What the user named: a file, or a stored run's model (`run:RUN_ID`)."""

    label: str
    path: Path
    run_id: str | None = None


def resolve_source(text: str, home: FarmHome, store_location: Any) -> ModelSource:
    """A model file as it is; `run:RUN_ID` the model that run measured, kept by its sha256 in the
    farm directory's artifact store (ONNX Runtime compiles of it come from the compile cache)."""
    if not text.startswith(RUN_PREFIX):
        path = Path(text)
        if not path.exists():
            raise UsageError(f"{text}: no such model file", hint="give a .onnx/.pt2/.pt file, or run:RUN_ID")
        return ModelSource(text, path)
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.store import ResultsStore

    store = ResultsStore(store_location)
    try:
        run_id = store.resolve_run_id(text[len(RUN_PREFIX) :])
        model = store.run(run_id).document.get("model") or {}
    finally:
        store.close()
    sha = model.get("sha256")
    stored = ArtifactStore(home.artifacts).path_for(sha, "model.onnx") if sha else None
    if stored is None or not stored.exists():
        raise UsageError(
            f"{text}: the run's model ({model.get('name', '?')}) is not in this farm directory's artifacts",
            hint="compare the model file itself",
        )
    return ModelSource(text, stored, run_id)


def check_same_inputs(a: Prepared, b: Prepared) -> None:
    """A and B must take the same inputs: names, dtypes and (resolved) shapes."""
    sig_a = {n: (tuple(v.shape), str(v.dtype)) for n, v in a.inputs.items()}
    sig_b = {n: (tuple(v.shape), str(v.dtype)) for n, v in b.inputs.items()}
    if sig_a != sig_b:
        diff = sorted(set(sig_a.items()) ^ set(sig_b.items()))
        shown = ", ".join(f"{n} {'x'.join(map(str, s))} {d}" for n, (s, d) in diff[:4])
        raise UsageError(
            f"the two models take different inputs ({shown}); a compare runs both on the same inputs",
            hint="compare models with one input signature (use --shape for dynamic dims)",
        )


def check_same_work(generate: GenerateSpec | None, a: Prepared, b: Prepared) -> None:
    """Fixed graphs: the same inputs. Folders: B takes A's prompt, at the headline depth only."""
    if generate is None:
        check_same_inputs(a, b)
        return
    from ondevice_farm.controller.compare_generation import headline_plan, share_prompt

    headline_plan(a)
    share_prompt(a, b)
