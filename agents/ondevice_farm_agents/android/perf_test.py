"""Stock `onnxruntime_perf_test`: its command line per target, and what it prints.

Output lines differ across ONNX Runtime versions ("cost:1.8 s" in 2020, "cost: 0.2 s" and
"First inference time cost" later, "P50 Latency: x s" with -s); the parser takes them all
and leaves out what a version does not print.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ondevice_farm.errors import UsageError
from ondevice_farm.targets import Target

#: farm backend -> perf_test's `-e` value
EXECUTION_PROVIDERS = {"cpu": "cpu", "xnnpack": "xnnpack", "nnapi": "nnapi", "qnn": "qnn"}
DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback|1"
#: perf_test's `-C` takes session config entries (`key|value`, space-separated, in one argument);
#: its own `-D` only turns spinning off, so the farm names the entry for both values
ALLOW_SPINNING = "session.intra_op.allow_spinning"
_OPTION = re.compile(r"^[A-Za-z0-9_.:/-]+\|[A-Za-z0-9_.:/-]+$")

_SECONDS = {"s": 1000.0, "sec": 1000.0, "ms": 1.0}
_PATTERNS = {
    "session_creation_ms": re.compile(r"^Session creation time cost:\s*([0-9.eE+-]+)\s*(s|ms)\b", re.M),
    "first_inference_ms": re.compile(r"^First inference time cost:\s*([0-9.eE+-]+)\s*(s|ms)\b", re.M),
    "average_ms": re.compile(
        r"^Average (?:inference )?time cost(?: total)?:\s*([0-9.eE+-]+)\s*(s|ms)\b", re.M
    ),
}
_REQUESTS = re.compile(r"^Total inference requests:\s*(\d+)", re.M)
_PEAK = re.compile(r"^Peak working set size:\s*(\d+)", re.M)
_CPU = re.compile(r"^Avg CPU usage:\s*(\d+)", re.M)
_LATENCY = re.compile(r"^(Min|Max|P\d+) Latency(?::| is)\s*([0-9.eE+-]+)\s*(s|sec|ms)\b", re.M)


@dataclass(frozen=True)
class PerfTestSummary:
    session_creation_ms: float | None = None
    first_inference_ms: float | None = None
    average_ms: float | None = None
    requests: int | None = None
    #: "min", "max", "p50", "p90", "p95", "p99", "p999" -> milliseconds
    latency_ms: dict[str, float] = field(default_factory=dict)
    peak_working_set_bytes: int | None = None
    avg_cpu_percent: int | None = None


def parse_output(text: str) -> PerfTestSummary:
    times: dict[str, float | None] = {}
    for key, pattern in _PATTERNS.items():
        match = pattern.search(text)
        times[key] = float(match.group(1)) * _SECONDS[match.group(2)] if match else None
    requests = _REQUESTS.search(text)
    peak = _PEAK.search(text)
    cpu = _CPU.search(text)
    return PerfTestSummary(
        session_creation_ms=times["session_creation_ms"],
        first_inference_ms=times["first_inference_ms"],
        average_ms=times["average_ms"],
        requests=int(requests.group(1)) if requests else None,
        latency_ms={
            m.group(1).lower(): float(m.group(2)) * _SECONDS[m.group(3)] for m in _LATENCY.finditer(text)
        },
        peak_working_set_bytes=int(peak.group(1)) if peak else None,
        avg_cpu_percent=int(cpu.group(1)) if cpu else None,
    )


def provider_options(text: str) -> list[str]:
    """A profile's `k|v k|v` provider options, each checked to be a plain key|value pair."""
    options = text.split()
    for option in options:
        if not _OPTION.match(option):
            raise UsageError(f"provider option {option!r} is not a plain key|value pair")
    return options


def perf_test_options(backend: str, options: list[str]) -> list[str]:
    """Profile options as perf_test's `-i` takes them: NNAPI's flags are bare words there
    (`NNAPI_FLAG_USE_FP16`), where the profile (and the native runner) write `NNAPI_FLAG_USE_FP16|1`."""
    if backend != "nnapi":
        return options
    return [o.split("|", 1)[0] for o in options if not o.endswith("|0")]


def command_line(
    binary: str,
    model: str,
    target: Target,
    runs: int,
    *,
    options: list[str] | None = None,
    threads: int | None = None,
    profile_prefix: str | None = None,
    disable_cpu_fallback: bool = False,
    allow_spinning: bool | None = None,
) -> list[str]:
    """perf_test's argv for one job (to be shell-quoted by the caller)."""
    if target.runtime != "ort" or target.backend not in EXECUTION_PROVIDERS:
        raise UsageError(f"onnxruntime_perf_test cannot run {target}")
    args = [binary, "-e", EXECUTION_PROVIDERS[target.backend], "-m", "times", "-r", str(max(1, runs)), "-s"]
    if options:
        args += ["-i", " ".join(options)]
    if threads:
        args += ["-x", str(threads)]
    if profile_prefix:
        args += ["-p", profile_prefix]
    config = []
    if allow_spinning is not None:
        config.append(f"{ALLOW_SPINNING}|{int(allow_spinning)}")
    if disable_cpu_fallback:
        config.append(DISABLE_CPU_FALLBACK)
    if config:
        args += ["-C", " ".join(config)]
    args.append(model)
    return args
