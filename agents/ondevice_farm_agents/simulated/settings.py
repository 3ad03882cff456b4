"""What a simulated unit does, read once from `AgentSettings.extra` (`FARM_AGENT_<NAME>` at the CLI).

simulated_units       how many units this host has (default 0: none)
simulated_prefix      serial prefix (default: the hostname); serials are PREFIX-0, PREFIX-1, ...
simulated_latency_ms  median time of one inference (default 2.0)
simulated_jitter      sigma of the log-normal spread of one inference around it (default 0.05)
simulated_job_s       median wall time of a whole job, log-normal (default: none, a job then
                      sleeps for its drawn inferences, as many as the request asks for)
simulated_job_spread  sigma of the log-normal spread of a job's wall time (default 0.25)
simulated_ops         op rows of the synthetic per-op profile (default 200)
simulated_outputs     reference | random | none (default reference): the artifact's own
                      outputs on this host's ONNX Runtime (once per model and node, then
                      cached) with a little noise, random arrays of its declared output
                      shapes, or no outputs at all
simulated_slow        SERIAL=FACTOR,...: units whose inferences take FACTOR times longer
                      (`@PATH`: read that list from a file at every job)
simulated_unplugged   a file listing unplugged serials, one per line: they vanish from
                      discovery, and a job running on one fails with DeviceLostError
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ondevice_farm.errors import UsageError

DEFAULT_LATENCY_MS = 2.0
DEFAULT_JITTER = 0.05
DEFAULT_JOB_SPREAD = 0.25
DEFAULT_OPS = 200
OutputsMode = Literal["reference", "random", "none"]
OUTPUTS_MODES: tuple[OutputsMode, ...] = ("reference", "random", "none")
DEFAULT_OUTPUTS: OutputsMode = "reference"


@dataclass(frozen=True)
class SimulatedSettings:
    units: int = 0
    prefix: str = ""
    latency_ms: float = DEFAULT_LATENCY_MS
    jitter: float = DEFAULT_JITTER
    #: None: a job lasts as long as its drawn inferences (load-test timing by `runs`)
    job_s: float | None = None
    job_spread: float = DEFAULT_JOB_SPREAD
    ops: int = DEFAULT_OPS
    outputs: OutputsMode = DEFAULT_OUTPUTS
    slow: str = ""
    unplugged: str = ""


def _number(extra: dict[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    text = extra.get(name, "")
    if text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name}={text!r} is not a number", hint=f"set FARM_AGENT_{name.upper()}") from None
    if value < minimum:
        raise UsageError(f"{name}={text!r} must be at least {minimum:g}")
    return value


def simulated_settings(extra: dict[str, str], hostname: str) -> SimulatedSettings:
    """The settings of this host's simulated units; a bad value is a UsageError naming it."""
    outputs = extra.get("simulated_outputs", "") or DEFAULT_OUTPUTS
    if outputs not in OUTPUTS_MODES:
        raise UsageError(f"simulated_outputs={outputs!r}: expected one of {', '.join(OUTPUTS_MODES)}")
    job_s = _number(extra, "simulated_job_s", 0.0)
    return SimulatedSettings(
        units=int(_number(extra, "simulated_units", 0)),
        prefix=extra.get("simulated_prefix", "") or hostname,
        latency_ms=_number(extra, "simulated_latency_ms", DEFAULT_LATENCY_MS),
        jitter=_number(extra, "simulated_jitter", DEFAULT_JITTER),
        job_s=job_s or None,
        job_spread=_number(extra, "simulated_job_spread", DEFAULT_JOB_SPREAD),
        ops=int(_number(extra, "simulated_ops", DEFAULT_OPS, minimum=1)),
        outputs=outputs,
        slow=extra.get("simulated_slow", ""),
        unplugged=extra.get("simulated_unplugged", ""),
    )
