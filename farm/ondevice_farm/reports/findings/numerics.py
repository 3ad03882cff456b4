"""How far outputs are from the reference, and whether precision explains it."""

from __future__ import annotations

from ondevice_farm.analysis.reference_state import FAILED, NOT_COMPARED, reference_state
from ondevice_farm.reports.compare import Column, Comparison
from ondevice_farm.reports.findings.base import Finding

#: what rounding alone allows: fp16 keeps 11 significant bits (about 66 dB for one rounding);
#: accumulated error in a deep graph brings that down, so below this floor something else is wrong
PRECISION_SNR_FLOOR_DB = {"fp16": 30.0, "int8": 15.0}
#: a device SNR this close to the host prediction for its precision is "explained by precision"
PREDICTION_MATCH_DB = 6.0


def _worst_snr(column: Column) -> tuple[str, float] | None:
    snrs = [(name, float(o["snr_db"])) for name, o in column.outputs().items() if o.get("snr_db") is not None]
    return min(snrs, key=lambda x: x[1]) if snrs else None


def reference_failed(comparison: Comparison) -> list[Finding]:
    """A job whose outputs did not pass the reference check at its target's tolerance."""
    findings = []
    for column in comparison.ok_columns:
        reference = column.job.get("reference") or {}
        state = reference_state(column.job)
        if state.state != FAILED:
            continue
        worst = _worst_snr(column)
        missing = reference.get("missing_outputs") or []
        detail = state.reason or "outside the tolerance"
        if worst and "worst output" not in detail:
            detail += f" (worst output {worst[0]} at {worst[1]:.1f} dB SNR)"
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


def reference_not_compared(comparison: Comparison) -> list[Finding]:
    """A job whose reference check could not compare outputs (its runner returned none): its
    numerics are unknown, not good. A recording without a reference section says nothing."""
    findings = []
    for column in comparison.ok_columns:
        state = reference_state(column.job)
        if state.state == NOT_COMPARED and isinstance(column.job.get("reference"), dict):
            findings.append(
                Finding(
                    "reference_not_compared",
                    0.3,
                    f"outputs of {column.label} were not compared with the reference: {state.reason}",
                    {"column": column.label, "reason": state.reason},
                )
            )
    return findings


def _precision_text(
    column_label: str,
    precision: str,
    output: str,
    snr: float,
    versus: str,
    floor: float,
    predicted: float | None,
) -> tuple[str, float]:
    head = f"{column_label} computes in {precision}: SNR {snr:.1f} dB on {output}{versus}"
    if predicted is not None:
        gap = predicted - snr
        if abs(gap) <= PREDICTION_MATCH_DB:
            return (
                f"{head}; the host {precision} prediction gives {predicted:.1f} dB, so {precision} "
                "rounding explains the difference"
            ), 0.35
        if gap > 0:
            return (
                f"{head}, {gap:.1f} dB below the host {precision} prediction ({predicted:.1f} dB): more "
                f"than {precision} rounding, look for a mis-lowered op or a lower-precision kernel"
            ), 0.8
        return (
            f"{head}, {-gap:.1f} dB above the host {precision} prediction ({predicted:.1f} dB): the device "
            "keeps more precision than the prediction assumes"
        ), 0.3
    if snr >= floor:
        return f"{head}, within what {precision} rounding explains (>= {floor:.0f} dB)", 0.35
    return (
        f"{head}, below what {precision} rounding explains (>= {floor:.0f} dB): look for a mis-lowered op"
    ), 0.8


def reduced_precision(comparison: Comparison) -> list[Finding]:
    """A column computing in fp16/int8 next to fp32 ones: its lower SNR against the host
    prediction for that precision where there is one, else against a floor."""
    full = [c for c in comparison.ok_columns if c.precision == "fp32" and _worst_snr(c)]
    findings = []
    for column in comparison.ok_columns:
        precision = column.precision or ""
        floor = PRECISION_SNR_FLOOR_DB.get(precision)
        worst = _worst_snr(column)
        if floor is None or worst is None:
            continue
        best_full = max((_worst_snr(c) or ("", 0.0) for c in full), key=lambda x: x[1], default=None)
        versus = f" vs {best_full[1]:.1f} dB on fp32 targets" if best_full else ""
        predicted = comparison.predicted_snr_db.get(precision, {}).get(worst[0])
        text, weight = _precision_text(column.label, precision, worst[0], worst[1], versus, floor, predicted)
        findings.append(
            Finding(
                "reduced_precision",
                weight,
                text,
                {
                    "column": column.label,
                    "precision": precision,
                    "snr_db": worst[1],
                    "floor_db": floor,
                    "fp32_snr_db": best_full[1] if best_full else None,
                    "predicted_snr_db": predicted,
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
