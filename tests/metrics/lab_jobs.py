"""Job documents of a simulated lab, made from the real host-cpu job (tests/metrics/conftest.py):
the real document with the parts a phone's job has at their lab size put in (synthetic, as a
simulated unit's would be): a 200-op profile over three backends with CPU fallbacks, a ten-minute
sustained run in 5 s windows, energy, a reference check, a phone's 13 thermal sensors, and for
some a generation section."""

from __future__ import annotations

import copy
from typing import Any

from ondevice_farm.store import ResultsStore, new_run_id

#: (profile, targets, backends its placement names): the first backend is the target's own
PROFILES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("pixel8", ("ort/nnapi", "ort/xnnpack", "ort/cpu"),
     ("NnapiExecutionProvider", "XnnpackExecutionProvider", "CPUExecutionProvider")),
    ("iphone15", ("coreml/all", "coreml/ane", "coreml/gpu"), ("ANE", "GPU", "CPU")),
    ("galaxy-s24", ("ort/qnn", "ort/nnapi", "ort/cpu"),
     ("QNNExecutionProvider", "NnapiExecutionProvider", "CPUExecutionProvider")),
)  # fmt: skip
UNITS_PER_PROFILE = 2
LAB_OPS = 200
#: ten minutes in 5 s windows
LAB_WINDOWS = 120
LAB_SENSORS = 13


def _ops(backends: tuple[str, ...]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    rows: list[dict[str, Any]] = []
    for index in range(LAB_OPS):
        backend = backends[0] if index % 10 < 7 else backends[1 + index % 2]
        median_us = 10.0 + (index * 37) % 500
        rows.append(
            {"name": f"node_{index}", "op_type": ("Conv", "MatMul", "Add", "Relu")[index % 4],
             "provider": backend, "median_us": median_us, "mean_us": median_us * 1.05, "runs": 5,
             "share": 1 / LAB_OPS, "share_of": "median_us", "time_source": "measured",
             "placement_source": "measured"}
        )  # fmt: skip
    placement: dict[str, int] = {}
    for row in rows:
        provider = str(row["provider"])
        placement[provider] = placement.get(provider, 0) + 1
    return rows, placement


def _sustained(base: dict[str, Any] | None) -> dict[str, Any]:
    sustained = copy.deepcopy(base) if base else {"summary": {}}
    windows = []
    for n in range(LAB_WINDOWS):
        windows.append(
            {"start_s": 5.0 * n, "end_s": 5.0 * (n + 1), "inferences": 500, "p50_ms": 2.0 + n / 100,
             "p90_ms": 2.5 + n / 100, "p99_ms": 3.0 + n / 100, "cpu_freq_mhz": 2400.0,
             "temperatures_c": {"skin": 30.0 + n / 10}, "max_temperature_c": 30.0 + n / 10,
             "thermal_status": "nominal"}
        )  # fmt: skip
    sustained.update(duration_s=600.0, window_s=5.0, windows=windows)
    sustained["summary"] = {
        **sustained.get("summary", {}),
        "first_p50_ms": 2.0, "steady_p50_ms": 3.2, "slowdown": 1.6, "time_to_first_throttle_s": 240.0,
        "energy_mj_per_inference": 1.5, "max_temperature_c": 42.0,
    }  # fmt: skip
    return sustained


def lab_job(
    base: dict[str, Any],
    *,
    model: str,
    profile: int,
    unit: int,
    target: str,
    finished_at: float,
    run_id: str,
    generation: bool = False,
) -> dict[str, Any]:
    """The real job as it would come from `unit` of PROFILES[profile] for `model` on `target`."""
    device, _, backends = PROFILES[profile]
    job = copy.deepcopy(base)
    ops, placement = _ops(backends)
    job.update(
        job_id=f"{run_id}-{model}-{device}-{target}-{unit}".replace("/", "_"),
        run_id=run_id,
        model={**job["model"], "name": model},
        device=device,
        unit=f"{device}-unit-{unit}",
        target=target,
        queued_at=finished_at - 700.0,
        started_at=finished_at - 650.0,
        finished_at=finished_at,
        ops=ops,
        placement=placement,
        fallback_ops=[row for row in ops if row["provider"].startswith("CPU")],
        sustained=_sustained(job.get("sustained")),
        energy={"mj_per_inference": 2.5, "uncertainty_mj": 0.3, "source": "estimated", "estimated": True},
        thermal={"after": {"temperatures_c": {f"zone{i}": 30.0 + i for i in range(LAB_SENSORS)}}},
        provenance={**job.get("provenance", {}), "latency": "measured", "placement": "measured"},
    )
    job["latency_ms"] = {**job["latency_ms"], "samples": [1.0 + i / 100 for i in range(100)]}
    if generation:
        job["generation"] = {"ttft_ms": {"median": 40.0}, "decode_tokens_per_s": {"median": 55.0}}
    return job


def file_run(store: ResultsStore, kind: str, jobs: list[dict[str, Any]], suite: str | None = None) -> None:
    """Store `jobs` (whose run_id is one new run's) as a complete run of `kind`."""
    run_id = jobs[0]["run_id"]
    store.start_run(run_id, kind, {"suite": suite} if suite else {}, suite=suite)
    for job in jobs:
        store.add_job(run_id, job)
    store.finish_run(run_id, "complete")


def run_id_at(n: int) -> str:
    return f"{new_run_id()}-{n:04d}"
