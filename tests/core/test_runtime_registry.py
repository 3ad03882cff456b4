"""The runtime registry is the one place a runtime is named (docs/runtimes.md): a runtime added to
its table is a target the farm parses, plans and compiles, with no other change; and every entry
of the table keeps its promises (an extra that exists, a compiler that resolves)."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile import compile_for_target
from ondevice_farm.compile.checkpoint import compile_checkpoint
from ondevice_farm.compile.placement import Placement
from ondevice_farm.compile.report import CompiledArtifact, CompileReport
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.stored import store_built
from ondevice_farm.errors import UsageError
from ondevice_farm.runtimes import registry
from ondevice_farm.runtimes.spec import SOURCE_ONNX, SOURCES, BackendSpec, RouteSpec, RuntimeSpec, load_entry
from ondevice_farm.targets import KNOWN_TARGETS, Target, parse_targets, with_torch_routes

ROOT = Path(__file__).resolve().parents[2]

#: a runtime that lives in this test file only: the farm must take it from the table alone
TOY = RuntimeSpec(
    name="toy",
    title="Toy runtime",
    backends=(
        BackendSpec("npu", "ToyNpu", "the toy NPU", computes_fp32_in="fp16"),
        BackendSpec("cpu", "", "the toy's own CPU kernels", accelerator=False),
    ),
    source=SOURCE_ONNX,
    compiler=f"{__name__}:compile_toy",
    extra="",
    routes=(RouteSpec("torch", "checkpoint", f"{__name__}:compile_toy", "the toy's own frontend"),),
    fallback_kernels=("toy-cpu",),
    artifact_name="model.toy",
    sidecar_suffixes=(".notes",),
)


def compile_toy(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    """A whole runtime's compiler: the model's bytes reversed, a note beside them."""
    out = request.model_path.with_name(TOY.artifact_name)
    out.write_bytes(request.model_path.read_bytes()[::-1])
    out.with_name(out.name + ".notes").write_text(request.precision)
    report = CompileReport(
        target=request.target.name,
        nodes_before=1,
        nodes_after=1,
        op_types_before={"Relu": 1},
        op_types_after={"ToyRelu": 1},
        fusions=[],
        placement={"ToyNpu": 1},
        extra={"runtime": "toy", "artifact_bytes": out.stat().st_size},
    )
    return store_built(CompiledArtifact(request.target, out, "", report), store, TOY.sidecar_suffixes)


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(registry.RUNTIMES, TOY.name, TOY)
    yield


def test_a_runtime_in_the_table_is_parsed_planned_and_compiled_with_no_other_change(
    toy_registered: None, tmp_path: Path
) -> None:
    npu, cpu = parse_targets("toy/npu, toy/cpu") or []
    assert (npu.is_accelerator, cpu.is_accelerator) == (True, False)
    assert not npu.needs_checkpoint and Target.parse("toy-torch/npu").needs_checkpoint
    assert [t.name for t in with_torch_routes([npu])] == ["toy/npu", "toy-torch/npu"]
    assert "toy/npu" in registry.target_names() and "toy-torch/cpu" in registry.target_names()
    assert "toy-cpu" in registry.fallback_kernels()
    assert Placement({"a": "toy-cpu", "b": "ToyNpu"}).fallbacks(npu) == ["a"]

    model = tmp_path / "model.onnx"
    model.write_bytes(b"not really onnx")
    store = ArtifactStore(tmp_path / "artifacts")
    artifact = compile_for_target(model, npu, store, coreml_precision="fp32")
    assert artifact.path.read_bytes() == b"xnno yllaer ton"
    assert artifact.path.parent != tmp_path and artifact.sha256 in str(artifact.path)
    assert Path(str(artifact.path) + ".notes").read_text() == "fp32"
    assert artifact.report.op_types_after == {"ToyRelu": 1}


def test_an_unregistered_runtime_backend_or_route_is_refused_with_the_known_targets() -> None:
    for text in ("toy/npu", "ort/ane", "ort-torch/cpu", "coreml-onnx/ane", "ort", "/cpu"):
        with pytest.raises(UsageError, match="known targets: ort/cpu"):
            Target.parse(text)


def test_the_default_tolerance_follows_the_backend_arithmetic_from_its_spec(toy_registered: None) -> None:
    from ondevice_farm.analysis.tolerance import computed_precision

    assert computed_precision(Target.parse("toy/npu"), "fp32") == "fp16"
    assert computed_precision(Target.parse("toy/cpu"), "fp32") == "fp32"
    assert computed_precision(Target.parse("ort/cuda"), "fp32") == "tf32"
    assert computed_precision(Target("?", "?"), None) == "fp32"


def test_a_checkpoint_runtime_without_a_checkpoint_says_so(tmp_path: Path) -> None:
    request = CompileRequest(model_path=tmp_path / "m.onnx", target=Target.parse("executorch/xnnpack"))

    def never(*_: object) -> CompiledArtifact:
        raise AssertionError("the converter ran without a checkpoint")

    with pytest.raises(UsageError, match="compiles a PyTorch checkpoint; the model is not one"):
        compile_checkpoint(request, ArtifactStore(tmp_path / "a"), never)


def test_every_registered_runtime_keeps_its_promises() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names: list[str] = []
    for spec in registry.RUNTIMES.values():
        assert re.fullmatch(r"[a-z0-9]+", spec.name), spec.name
        assert spec.source in SOURCES and set(spec.extra_sources) <= set(SOURCES)
        assert not spec.extra or spec.extra in extras, (
            f"{spec.name}: no extra {spec.extra!r} in pyproject.toml"
        )
        assert spec.fallback_kernels, f"{spec.name}: where do the ops its accelerators leave run?"
        assert any(not b.accelerator for b in spec.backends), (
            f"{spec.name}: no CPU-only backend to compare with"
        )
        for backend in spec.backends:
            assert backend.meaning and backend.computes_fp32_in in ("fp32", "tf32", "fp16"), backend
        for reference in [spec.compiler, *(route.compiler for route in spec.routes)]:
            assert callable(load_entry(reference)), reference
        names += [spec.name, *(f"{spec.name}-{route.name}" for route in spec.routes)]
    assert len(names) == len(set(names))
    assert registry.target_names() == KNOWN_TARGETS
    assert Counter(t.split("/")[0] for t in KNOWN_TARGETS).keys() == set(names)
    # the run schema names the runtimes a job's target may have: every registered one and route
    schema = json.loads((ROOT / "farm/ondevice_farm/schema/run.schema.json").read_text())
    pattern = schema["$defs"]["job_base"]["properties"]["target"]["pattern"]
    for target in KNOWN_TARGETS:
        assert re.fullmatch(pattern, target), f"{target}: the run schema's target pattern refuses it"
