"""A PyTorch source's two CoreML routes: where Apple's converter and the ONNX route part ways."""

from __future__ import annotations

from typing import Any

from ondevice_farm.reports.compare import Comparison
from ondevice_farm.reports.findings.base import Finding


def _worst_snr(predicted: dict[str, Any] | None) -> float | None:
    values = [float(o["snr_db"]) for o in ((predicted or {}).get("outputs") or {}).values()]
    return min(values) if values else None


def route_divergence(comparison: Comparison) -> list[Finding]:
    """Both CoreML routes of the checkpoint built different MIL programs, or one was refused."""
    study = (comparison.model.get("source") or {}).get("routes") or {}
    if "onnx" not in study or "torch" not in study:
        return []
    if "error" in study["torch"]:
        return [
            Finding(
                "route_divergence",
                0.3,
                f"coremltools' PyTorch frontend refused the checkpoint ({study['torch']['error']}); "
                "only the ONNX route reaches CoreML",
                {"error": study["torch"]["error"]},
            )
        ]
    if not study.get("op_differences"):
        return []
    text = str(study.get("divergence") or "")
    predicted = study.get("predicted") or {}
    onnx_snr, torch_snr = _worst_snr(predicted.get("onnx")), _worst_snr(predicted.get("torch"))
    if onnx_snr is not None and torch_snr is not None:
        text += (
            f"; predicted {study.get('precision')} SNR against eager {torch_snr:.1f} dB (PyTorch route) "
            f"vs {onnx_snr:.1f} dB (ONNX route), host MIL executor, not measured"
        )
    return [
        Finding(
            "route_divergence",
            0.2,
            text,
            {
                "op_differences": study["op_differences"],
                "predicted_snr_db": {"onnx": onnx_snr, "torch": torch_snr},
            },
        )
    ]
