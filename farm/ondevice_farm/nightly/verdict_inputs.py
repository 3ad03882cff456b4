"""What the nightly keeps of a stored job: the fields its verdicts read, not the job summary.

A job summary, parsed, is about 40 kB in Python at a simulated unit's 200 ops (its pooled samples,
fallback list, transfers, compile report; benchmarks/lab_scale.py measured the submitter growing
28 MiB per 1,000 jobs while it held a night's summaries). The nightly reads each summary once, as
the store pages it out, and keeps:

- of a job's baseline (its last success): what `nightly/compare.py` judges it by: the reference
  check per output (`numeric_findings`), the names of the ops that fell back and the fusion counts
  (`placement_findings`), the pooled samples (the within-run diagnostic) and the session p50s;
- of each older night of its history, and of the suite's last run: identity, status and session
  p50s (the session-level test's history), nothing else.

Tonight's jobs are compared as they stream past and are not kept (`nightly/run.py`).
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

#: top-level fields every kept job has: its key (`compare.job_key`), its outcome, and what the
#: baseline's choice and the queue's ordering read (artifact, duration)
IDENTITY = (
    "job_id",
    "run_id",
    "device",
    "requested",
    "unit",
    "target",
    "status",
    "error",
    "artifact_sha256",
    "duration_s",
)


def _latency(job: dict[str, Any], samples: bool) -> dict[str, Any]:
    latency = job.get("latency_ms") or {}
    kept: dict[str, Any] = {}
    if latency.get("p50") is not None:
        kept["p50"] = latency["p50"]
    repeats = [{"p50": r["p50"]} for r in latency.get("repeats") or [] if r.get("p50")]
    if repeats:
        kept["repeats"] = repeats
    if samples and latency.get("samples"):
        # 8 bytes a sample instead of a float object and a list slot each (~32)
        kept["samples"] = array("d", latency["samples"])
    return kept


def _point(job: dict[str, Any], samples: bool) -> dict[str, Any]:
    point = {k: job[k] for k in IDENTITY if k in job}
    point["model"] = {"name": (job.get("model") or {}).get("name")}
    point["latency_ms"] = _latency(job, samples)
    return point


def history_point(job: dict[str, Any]) -> dict[str, Any]:
    """A job of an older night (or of the suite's last run): identity, status, session p50s."""
    return _point(job, samples=False)


def verdict_view(job: dict[str, Any]) -> dict[str, Any]:
    """A job as its baseline: the history point, and what the numeric and placement findings and
    the diagnostic compare (`analysis/regression.py` reads `fallback_op_names` and
    `fusion_counts` where a view has them instead of `fallback_ops` and `compile.fusions`)."""
    view = _point(job, samples=True)
    reference = job.get("reference")
    if isinstance(reference, dict):
        view["reference"] = {
            "passed": reference.get("passed"),
            "outputs": {
                name: {"snr_db": output.get("snr_db")}
                for name, output in (reference.get("outputs") or {}).items()
                if isinstance(output, dict)
            },
        }
    # op names repeat across a model's jobs and nights: one string each
    view["fallback_op_names"] = tuple(sys.intern(str(op["name"])) for op in job.get("fallback_ops") or [])
    view["fusion_counts"] = {
        sys.intern(str(f["op_type"])): f.get("after", 0)
        for f in (job.get("compile") or {}).get("fusions") or []
    }
    return view
