"""The compile cache of the runtimes whose compile costs seconds (compile/cached.py: TVM, IREE):
a compile done before is reused only while everything that decided it is the same and its
artifact (with its sidecars) is still in the store."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.cached import compiled_once
from ondevice_farm.compile.report import CompiledArtifact, CompileReport, op_count_changes
from ondevice_farm.compile.request import CompileCache, CompileRequest
from ondevice_farm.compile.stored import store_built
from ondevice_farm.targets import Target

SIDECAR = ".kernels.json"


class Compiler:
    """A compiler that counts its builds and writes an artifact with a sidecar beside it."""

    def __init__(self, scratch: Path, store: ArtifactStore) -> None:
        self.scratch, self.store, self.builds = scratch, store, 0

    def __call__(self, request: CompileRequest) -> CompiledArtifact:
        self.builds += 1
        built = self.scratch / "model.so"
        built.write_text(f"kernels for {request.input_shapes}")
        Path(str(built) + SIDECAR).write_text("[]")
        before, after = Counter({"Conv": 2, "Relu": 2}), Counter({"fused_conv2d_relu": 2})
        report = CompileReport(
            request.target.name, 4, 2, dict(before), dict(after), op_count_changes(before, after)
        )
        return store_built(CompiledArtifact(request.target, built, "", report), self.store, (SIDECAR,))


def test_a_compile_is_reused_only_while_what_decided_it_and_its_artifact_are_unchanged(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    compiler = Compiler(tmp_path, store)
    request = CompileRequest(
        model_path=tmp_path / "m.onnx",
        target=Target.parse("ort/cpu"),
        input_shapes={"x": (1, 3, 16, 16)},
        cache=CompileCache(tmp_path / "compiled", "a" * 64),
    )

    def compile_(req: CompileRequest, identity: str = "tool==1") -> CompiledArtifact:
        return compiled_once(
            req, store, identity=identity, artifact_name="model.so", sidecar_suffixes=(SIDECAR,),
            build=lambda: compiler(req),
        )  # fmt: skip

    first = compile_(request)
    again = compile_(request)
    assert compiler.builds == 1
    assert (again.path, again.sha256, again.report) == (first.path, first.sha256, first.report)
    assert again.report.fusions == first.report.fusions  # the report comes back whole, typed
    # anything that decides the output compiles again: shapes, the tool, the source
    compile_(replace(request, input_shapes={"x": (2, 3, 16, 16)}))
    compile_(request, identity="tool==2")
    compile_(replace(request, cache=CompileCache(tmp_path / "compiled", "b" * 64)))
    assert compiler.builds == 4
    compile_(request)
    assert compiler.builds == 4
    # an entry whose artifact or sidecar `farm gc` removed is compiled again, not handed out
    Path(str(first.path) + SIDECAR).unlink()
    compile_(request)
    assert compiler.builds == 5
    first.path.unlink()
    compile_(request)
    assert compiler.builds == 6
    # no cache asked for: every call builds
    compile_(replace(request, cache=None))
    compile_(replace(request, cache=None))
    assert compiler.builds == 8


def test_a_checkpoint_runtime_reuses_its_compile_only_for_the_same_checkpoint(tmp_path: Path) -> None:
    """ExecuTorch and LiteRT compile the checkpoint itself: it, not the ONNX source, keys the entry."""
    from ondevice_farm.compile.checkpoint import compile_checkpoint
    from ondevice_farm.torch_source.checkpoint import TorchCheckpoint

    store = ArtifactStore(tmp_path / "artifacts")
    builds: list[str] = []

    def convert(
        source: TorchCheckpoint, target: Target, scratch: Path, shapes: dict[str, tuple[int, ...]]
    ) -> CompiledArtifact:
        builds.append(source.sha256)
        built = scratch / "model.pte"
        built.write_text(f"program of {source.sha256}")
        Path(str(built) + ".etrecord").write_text("record")
        report = CompileReport(target.name, 1, 1, {"Conv": 1}, {"Conv": 1}, [])
        return CompiledArtifact(target, built, "", report)

    def checkpoint(sha: str) -> TorchCheckpoint:
        return TorchCheckpoint(tmp_path / "m.pt2", sha, "exported_program", "2.13.0", (), None)

    def request(sha: str) -> CompileRequest:
        return CompileRequest(
            model_path=tmp_path / "export.onnx",  # the same ONNX export's hash for both checkpoints
            target=Target.parse("executorch/xnnpack"),
            checkpoint=checkpoint(sha),
            input_shapes={"x": (1, 3, 16, 16)},
            cache=CompileCache(tmp_path / "compiled", "e" * 64),
        )

    first = compile_checkpoint(request("a" * 64), store, convert, "executorch==1")
    again = compile_checkpoint(request("a" * 64), store, convert, "executorch==1")
    assert builds == ["a" * 64] and again.path == first.path
    assert Path(str(again.path) + ".etrecord").is_file()
    compile_checkpoint(request("b" * 64), store, convert, "executorch==1")
    compile_checkpoint(request("a" * 64), store, convert, None)  # no identity: no cache
    assert builds == ["a" * 64, "b" * 64, "a" * 64]
