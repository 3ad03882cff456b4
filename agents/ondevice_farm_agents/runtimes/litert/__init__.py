"""LiteRT on the agents: a `.tflite` model run by `ai_edge_litert`'s interpreter in a Python
session (`session.py`, pushed to units as it is). Its Python interpreter has no op profiler: a job
asked for a per-op profile says so. This `__init__` is pure data: the registry imports it."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm_agents.runtimes.spec import SessionRuntime

RUNTIME = SessionRuntime(
    name="litert",
    title="LiteRT",
    session_module=Path(__file__).resolve().with_name("session.py"),
    imported_first=("ai_edge_litert.interpreter",),
    package="ai_edge_litert",
    extra="litert",
    pip_name="ai-edge-litert",
    android_runner="benchmark_model",
    no_profile_note=(
        "per-op profile: none; LiteRT's Python interpreter exposes no op profiler (the compile report's "
        "delegated/builtin node counts say where ops run)"
    ),
)
