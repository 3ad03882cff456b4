"""What a stored run measured, in one line for a title or a header: its model, or for a nightly
run (which has no single model) its suite and the suite's models."""

from __future__ import annotations

from typing import Any


def is_nightly(run: dict[str, Any]) -> bool:
    return run.get("kind") == "nightly" or "model" not in run


def run_subject(run: dict[str, Any]) -> str:
    if not is_nightly(run):
        return str((run.get("model") or {}).get("name", "?"))
    names = sorted({str(m.get("name", "?")) for m in run.get("models") or []})
    return f"nightly {run.get('suite', '?')}, {len(names)} model(s): {', '.join(names)}"
