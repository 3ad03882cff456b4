"""The measuring half of `benchmarks/cuda_check.sh`: host-cpu against host-cuda, through the HostAgent.

It runs what `farm submit --devices host-cpu,host-cuda` runs on each unit (same agent, same
timing), without Ray, so it works on a GPU machine where Ray is not installed. For each model:
the CPU reference (ORT, CPU provider, optimisations off), one job on host-cpu, one on host-cuda
with IO binding off and one with it on; numeric diff, latency, per-op placement and transfers.
Then one raw ORT profile and the verbose session log of a CUDA session, kept as files: they are
the recorded outputs `tests/cuda/fixtures/` wants.

    python benchmarks/cuda_check_run.py OUT_DIR MODEL [MODEL ...] [--runs N] [--build-celu PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ondevice_farm.analysis.latency import latency_stats
from ondevice_farm.analysis.numeric import compare_outputs, default_tolerance
from ondevice_farm.analysis.ort_log import parse_session_log
from ondevice_farm.analysis.transfers import transfer_report
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.profiles import load_profiles
from ondevice_farm.reference import reference_outputs
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.host.cuda import CUDA_PROVIDER, CudaOptions
from ondevice_farm_agents.host.native_log import captured_native_log, verbose_ort_logging

SEED = 0
PROFILED_RUNS = 10


def build_celu_model(path: Path) -> Path:
    """MatMul -> Celu -> MatMul. ORT's CUDA provider registers no Celu kernel (docs/OperatorKernels.md
    lists Celu under the CPU provider only), so Celu runs on the CPU between two GPU MatMuls."""
    rng = np.random.default_rng(SEED)
    size = 512
    weights = [
        helper.make_tensor(
            n, TensorProto.FLOAT, [size, size], rng.standard_normal(size * size).astype(np.float32)
        )
        for n in ("w1", "w2")
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Celu", ["h1"], ["h2"], name="celu"),
        helper.make_node("MatMul", ["h2", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "celu_fallback",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, size])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _job(
    agent: HostAgent,
    profile: str,
    target: Target,
    model: Path,
    inputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    runs: int,
) -> dict[str, Any]:
    units = {u.profile: u for u in agent.discover()}
    if profile not in units:
        return {"device": profile, "target": target.name, "status": "absent", "error": agent.absences()}
    request = RunRequest(artifact=model, artifact_sha256="", target=target, inputs=inputs, runs=runs)
    try:
        run = agent.run(units[profile], request)
    except Exception as exc:  # the report records the failure and goes on with the next job
        return {"device": profile, "target": target.name, "status": "failed", "error": str(exc)}
    stats = latency_stats(run.samples_ms)
    check = compare_outputs(reference, run.outputs, default_tolerance(target))
    provider = target.ort_providers()[0]
    return {
        "device": profile,
        "target": target.name,
        "status": "ok",
        "unit": units[profile].properties,
        "latency_ms": {
            "p50": stats.p50,
            "p90": stats.p90,
            "mean": stats.mean,
            "min": stats.min,
            "cv": stats.cv,
        },
        "load_ms": run.load_ms,
        "first_inference_ms": run.first_inference_ms,
        "peak_host_memory_mb": None if run.peak_memory_bytes is None else run.peak_memory_bytes / 2**20,
        "reference": {
            name: {"max_abs": d.max_abs, "cosine": d.cosine, "snr_db": d.snr_db}
            for name, d in check.outputs.items()
        },
        "reference_passed": check.passed,
        "ops": [
            {"name": o.name, "op_type": o.op_type, "provider": o.provider, "mean_us": o.mean_us}
            for o in run.ops
        ],
        "transfers": transfer_report(run.ops, provider).to_dict(),
        "notes": run.notes,
    }


def _record_cuda_session(model: Path, inputs: dict[str, np.ndarray], out: Path, stem: str) -> dict[str, str]:
    """One CUDA session with profiling and verbose logging: the raw files, kept as they came."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 0
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = str(Path(tmp) / "p")
        with verbose_ort_logging(), captured_native_log() as log:
            session = ort.InferenceSession(str(model), options, providers=CudaOptions().providers())
        for _ in range(PROFILED_RUNS):
            session.run(None, inputs)
        profile = Path(session.end_profiling())
        shutil.copy(profile, out / f"{stem}-cuda-profile.json")
    (out / f"{stem}-cuda-session.log").write_text(log.text)
    placement = parse_session_log(log.text)
    return {
        "placement_counts": json.dumps(placement.placement_counts),
        "copies_logged": str(len(placement.copies)),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("models", type=Path, nargs="*")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--build-celu", type=Path, help="write the Celu fallback model here and run it first")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    models = ([build_celu_model(args.build_celu)] if args.build_celu else []) + list(args.models)
    profiles = load_profiles()
    plain = HostAgent(AgentSettings(profiles=profiles))
    bound = HostAgent(AgentSettings(profiles=profiles, extra={"cuda_io_binding": "1"}))
    results: dict[str, Any] = {"absent": [], "models": {}}
    plain.discover()
    results["absent"] = plain.absences()
    cuda_here = not results["absent"]
    for model in models:
        info = inspect_model(model)
        shapes = resolve_shapes(info, {})
        inputs = seeded_inputs(info, shapes, SEED, onnx.load(str(model), load_external_data=False))
        sha = hashlib.sha256(model.read_bytes()).hexdigest()
        with tempfile.TemporaryDirectory() as cache:
            reference = reference_outputs(model, sha, inputs, Path(cache))
        jobs = [
            _job(plain, "host-cpu", Target("ort", "cpu"), model, inputs, reference, args.runs),
            _job(plain, "host-cuda", Target("ort", "cuda"), model, inputs, reference, args.runs),
            {
                **_job(bound, "host-cuda", Target("ort", "cuda"), model, inputs, reference, args.runs),
                "io_binding": True,
            },
        ]
        entry: dict[str, Any] = {"path": str(model), "jobs": jobs}
        if cuda_here:
            entry["recorded"] = _record_cuda_session(model, inputs, args.out, model.stem)
        results["models"][model.stem] = entry
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    for stem, entry in results["models"].items():
        for job in entry["jobs"]:
            tag = f"{stem} {job['device']} {job['target']}{' io_binding' if job.get('io_binding') else ''}"
            if job["status"] != "ok":
                print(f"{tag}: {job['status']}: {job['error']}")
                continue
            t = job["transfers"]
            print(
                f"{tag}: p50 {job['latency_ms']['p50']:.3f} ms, load {job['load_ms']:.0f} ms, "
                f"{t['fallback_nodes']} fallback node(s), {t['copy_count']} copies = "
                f"{100 * t['copy_share']:.1f}% of node time, {t['partitions']} partition(s), "
                f"reference {'ok' if job['reference_passed'] else 'FAILED'}"
            )
    print("absent: " + "; ".join(results["absent"]) if results["absent"] else f"{CUDA_PROVIDER} usable")
    return 0 if cuda_here else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
