"""One line for a job's energy per inference: the terminal's and the HTML report's words."""

from __future__ import annotations

from typing import Any

from rich.text import Text


def energy_summary(job: dict[str, Any]) -> str:
    """e.g. `0.0139 ± 0.0004 mJ/inference (estimated: 3103 mW under load - 573 mW idle, ...)`;
    "" where the job has no `energy` section."""
    energy = job.get("energy")
    if not energy:
        return ""
    if energy.get("mj_per_inference") is None:
        return f"no figure: {energy.get('absent') or 'not measured'}"
    line = f"{energy['mj_per_inference']:.4g}"
    if energy.get("uncertainty_mj") is not None:
        line += f" ± {energy['uncertainty_mj']:.2g}"
    # a battery's sign convention; a counter (host RAPL) has none
    convention = energy.get("sign_convention")
    line += (
        f" mJ/inference (estimated: {energy['active_mw']:.0f} mW under load - {energy['baseline_mw']:.0f} mW "
        f"idle over {energy['inferences']} inferences"
    )
    line += f"; battery current {convention})" if convention else ")"
    return line


def energy_lines(job: dict[str, Any]) -> Text:
    text = Text()
    summary = energy_summary(job)
    if summary:
        text.append(f"  energy {summary}\n", style="dim" if job["energy"].get("absent") else "")
        for note in job["energy"].get("notes") or []:
            text.append(f"    {note}\n", style="dim")
    return text
