"""CoreML conversion benchmark: conversion time, peak memory, and the host MIL executor's error.

For each model (default: the real-architecture models in ../shared/models), in a fresh process:
  - compile_coreml (fp16, coreml/ane) wall time and peak RSS, beside ONNX Runtime's own
    session build at ORT_ENABLE_ALL for the same model (ratio printed);
  - the host MIL executor in fp32 against ONNX Runtime (optimisations off, fp32): max abs and
    relative error, SNR; and in fp16 the predicted drift (max abs, SNR); executor time vs ORT run.

    python benchmarks/coreml_convert.py [MODEL.onnx ...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODELS_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
SEED = 0


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _feeds(session: Any) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    feeds = {}
    for info in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in info.shape]
        if "int" in info.type:
            feeds[info.name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            feeds[info.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _measure(path_text: str) -> dict[str, Any]:
    import coremltools  # noqa: F401  (imported before the baseline: its import is not the conversion)
    import onnxruntime as ort

    from ondevice_farm.analysis.numeric import diff_output
    from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
    from ondevice_farm.targets import Target

    path = Path(path_text)
    baseline = _peak_rss_mib()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        artifact = compile_coreml(path, Target.parse("coreml/ane"), Path(tmp))
        convert_s = time.perf_counter() - started
        peak = _peak_rss_mib()

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(Path(tmp) / "ort.onnx")
        options.log_severity_level = 3  # the NCHWc "hardware specific" warning is expected here
        started = time.perf_counter()
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        ort_compile_s = time.perf_counter() - started

    reference_options = ort.SessionOptions()
    reference_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), reference_options, providers=["CPUExecutionProvider"])
    feeds = _feeds(session)
    started = time.perf_counter()
    reference = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
    ort_run_s = time.perf_counter() - started

    started = time.perf_counter()
    fp32 = predict_drift(path, feeds, precision="fp32")
    fp32_s = time.perf_counter() - started
    fp16 = predict_drift(path, feeds, precision="fp16")

    name, ref = next(iter(reference.items()))
    exact, drift = diff_output(ref, fp32[name]), diff_output(ref, fp16[name])
    return {
        "model": path.name,
        "onnx_nodes": artifact.report.nodes_before,
        "mil_ops": artifact.report.nodes_after,
        "convert_s": round(convert_s, 3),
        "ort_compile_s": round(ort_compile_s, 3),
        "peak_rss_mib": round(peak, 1),
        "convert_rss_delta_mib": round(peak - baseline, 1),
        "fp32_max_abs": exact.max_abs,
        "fp32_rel": exact.max_abs / max(float(np.max(np.abs(ref))), 1e-12),
        "fp32_snr_db": round(exact.snr_db, 1),
        "fp16_max_abs": drift.max_abs,
        "fp16_snr_db": round(drift.snr_db, 1),
        "executor_fp32_s": round(fp32_s, 3),
        "ort_run_s": round(ort_run_s, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    models = args.models or sorted(DEFAULT_MODELS_DIR.resolve().glob("*.onnx"))
    if not models:
        parser.error(f"no models given and none in {DEFAULT_MODELS_DIR.resolve()}")
    # A fresh process per model, so peak RSS belongs to that model alone.
    context = multiprocessing.get_context("spawn")
    rows = []
    for model in models:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            rows.append(pool.submit(_measure, str(model)).result())
    header = (
        f"{'model':<20} {'nodes':>5} {'MIL':>4} {'convert s':>9} {'ORT s':>6} {'ratio':>6} {'peak MiB':>8} "
        f"{'+MiB':>6} {'fp32 rel err':>12} {'fp32 SNR':>8} {'fp16 max abs':>12} {'fp16 SNR':>8}"
    )
    print(header)
    for r in rows:
        ratio = r["convert_s"] / r["ort_compile_s"] if r["ort_compile_s"] else float("nan")
        print(
            f"{r['model']:<20} {r['onnx_nodes']:>5} {r['mil_ops']:>4} {r['convert_s']:>9.2f} "
            f"{r['ort_compile_s']:>6.2f} {ratio:>5.1f}x {r['peak_rss_mib']:>8.0f} "
            f"{r['convert_rss_delta_mib']:>6.0f} {r['fp32_rel']:>12.1e} {r['fp32_snr_db']:>8.1f} "
            f"{r['fp16_max_abs']:>12.2e} {r['fp16_snr_db']:>8.1f}"
        )
    print("\nhost MIL executor fp32 vs ORT run time:")
    for r in rows:
        print(
            f"  {r['model']:<20} {r['executor_fp32_s']:.3f} s vs {r['ort_run_s']:.4f} s "
            f"({r['executor_fp32_s'] / max(r['ort_run_s'], 1e-9):.0f}x, includes lowering and passes)"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
