"""How far outputs are from the reference, and whether precision explains it."""

from __future__ import annotations

from farm.reports.compare import Column, Comparison
from farm.reports.findings.base import Finding

#: what rounding alone allows: fp16 keeps 11 significant bits (about 66 dB for one rounding);
#: accumulated error in a deep graph brings that down, so below this floor something else is wrong
PRECISION_SNR_FLOOR_DB = {"fp16": 30.0, "int8": 15.0}


def _worst_snr(column: Column) -> tuple[str, float] | None:
    snrs = [(name, float(o["snr_db"])) for name, o in column.outputs().items() if o.get("snr_db") is not None]
    return min(snrs, key=lambda x: x[1]) if snrs else None


def reference_failed(comparison: Comparison) -> list[Finding]:
    """A job whose outputs did not pass the reference check at its target's tolerance."""
    findings = []
    for column in comparison.ok_columns:
        reference = column.job.get("reference") or {}
        if reference.get("passed", True):
            continue
        worst = _worst_snr(column)
        missing = reference.get("missing_outputs") or []
        detail = f"worst output {worst[0]} at {worst[1]:.1f} dB SNR" if worst else "no comparable output"
        if missing:
            detail += f"; missing {', '.join(missing)}"
        findings.append(
            Finding(
                "reference_failed",
                1.0,
                f"outputs of {column.label} fail the reference check: {detail}",
                {
                    "column": column.label,
                    "worst": worst,
                    "missing": missing,
                    "tolerance": reference.get("tolerance"),
                },
            )
        )
    return findings


def reduced_precision(comparison: Comparison) -> list[Finding]:
    """A column computing in fp16/int8 next to fp32 ones: its lower SNR is expected, up to a floor."""
    full = [c for c in comparison.ok_columns if c.precision == "fp32" and _worst_snr(c)]
    findings = []
    for column in comparison.ok_columns:
        floor = PRECISION_SNR_FLOOR_DB.get(column.precision or "")
        worst = _worst_snr(column)
        if floor is None or worst is None:
            continue
        best_full = max((_worst_snr(c) or ("", 0.0) for c in full), key=lambda x: x[1], default=None)
        versus = f" vs {best_full[1]:.1f} dB on fp32 targets" if best_full else ""
        if worst[1] >= floor:
            text = (
                f"{column.label} computes in {column.precision}: SNR {worst[1]:.1f} dB on "
                f"{worst[0]}{versus}, "
                f"within what {column.precision} rounding explains (>= {floor:.0f} dB)"
            )
            weight = 0.35
        else:
            text = (
                f"{column.label} computes in {column.precision} but its SNR ({worst[1]:.1f} dB on "
                f"{worst[0]}) is "
                f"below what {column.precision} rounding explains (>= {floor:.0f} dB): look for a "
                "mis-lowered "
                "op"
            )
            weight = 0.8
        findings.append(
            Finding(
                "reduced_precision",
                weight,
                text,
                {
                    "column": column.label,
                    "precision": column.precision,
                    "snr_db": worst[1],
                    "floor_db": floor,
                    "fp32_snr_db": best_full[1] if best_full else None,
                },
            )
        )
    return findings


def topk_disagreement(comparison: Comparison) -> list[Finding]:
    """Classifier outputs whose top-1 class differs from the reference's (where the job recorded top-k)."""
    findings = []
    for column in comparison.ok_columns:
        for name, output in column.outputs().items():
            topk = output.get("topk")
            if topk and topk.get("top1_match") is False:
                findings.append(
                    Finding(
                        "topk_disagreement",
                        0.9,
                        (
                            f"{column.label} picks a different top-1 class on {name} than the reference "
                            f"(top-5 overlap {float(topk.get('top5_overlap', 0)):.0%})"
                        ),
                        {"column": column.label, "output": name, "topk": topk},
                    )
                )
    return findings
