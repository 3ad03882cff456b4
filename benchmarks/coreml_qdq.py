"""QDQ models on CoreML: package sizes and drift of the kept and folded programs.

    PYTHONPATH=. python benchmarks/coreml_qdq.py

For a ResNet-style CNN (widths 16 and 64) and a transformer encoder, each quantized by
onnxruntime.quantization.quantize_static per channel and per tensor, prints the .mlpackage size
(kept 8-bit vs folded to float, coreml/ane, iOS17) and the host executor's outputs against ONNX
Runtime: the QDQ graph as written (ORT_DISABLE_ALL), ORT's fused int8 kernels (default level) and
the float model, as SNR in dB. Executor figures are predicted on the host, not measured on a device.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from ondevice_farm.analysis.numeric import diff_output
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.onnx_models import resnet_blocks, transformer_encoder
from tests.coreml.quantized_models import feeds, quantize_qdq

MODELS = {
    "resnet16": lambda: resnet_blocks(width=16),
    "resnet64": lambda: resnet_blocks(width=64),
    "encoder": transformer_encoder,
}


def _ort(path: Path, inputs: dict[str, np.ndarray], level: str) -> np.ndarray:
    options = ort.SessionOptions()
    if level == "none":
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, inputs)[0])


def main() -> int:
    print(
        "model     weights      kept KiB  float KiB  int8 w KiB | SNR dB (host executor): "
        "kept32 vs QDQ, vs fused int8, vs float; kept16 vs QDQ; float-mode32 vs float"
    )
    with tempfile.TemporaryDirectory(prefix="farm-qdq-") as tmp:
        for name, build in MODELS.items():
            for per_channel in (True, False):
                work = Path(tmp) / f"{name}{int(per_channel)}"
                float_path, qdq_path = quantize_qdq(build(), work, per_channel=per_channel)
                ane = Target.parse("coreml/ane")
                kept = compile_coreml(qdq_path, ane, work / "keep").report.extra
                folded = compile_coreml(qdq_path, ane, work / "float", quantization="float").report.extra
                inputs = feeds(onnx.load(str(qdq_path)), seed=7)
                qdq = _ort(qdq_path, inputs, "none")
                fused = _ort(qdq_path, inputs, "all")
                reference = _ort(float_path, inputs, "none")

                def run(precision: str, mode: str) -> np.ndarray:
                    out = predict_drift(qdq_path, inputs, precision=precision, quantization=mode)  # noqa: B023
                    return next(iter(out.values()))

                kept32, kept16, float32 = run("fp32", "keep"), run("fp16", "keep"), run("fp32", "float")
                snr = [
                    diff_output(qdq, kept32).snr_db,
                    diff_output(fused, kept32).snr_db,
                    diff_output(reference, kept32).snr_db,
                    diff_output(qdq, kept16).snr_db,
                    diff_output(reference, float32).snr_db,
                ]
                print(
                    f"{name:9} {'per-channel' if per_channel else 'per-tensor ':11} "
                    f"{kept['package_bytes'] / 1024:9.1f} {folded['package_bytes'] / 1024:10.1f} "
                    f"{kept['weight_bytes'].get('int8', 0) / 1024:11.1f} | "
                    + "  ".join(f"{v:6.1f}" for v in snr)
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
