"""What a Ray call's failure means to the farm: the agent's own error, or a lost unit.

Ray wraps what an actor raised in `RayTaskError`; an actor or node that died surfaces as
`RayActorError` (with `ActorDiedError`, `ActorUnavailableError`), `NodeDiedError`,
`WorkerCrashedError` or `OwnerDiedError`. The first kind is the job's fault or the device's;
the others mean the unit is gone, and the job may run again elsewhere.
"""

from __future__ import annotations

from ondevice_farm.errors import DeviceError, DeviceLostError, FarmError


def to_farm_error(exc: BaseException) -> FarmError:
    import ray.exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, FarmError):
            return cause
        if isinstance(cause, rex.RayActorError | rex.NodeDiedError):
            return to_farm_error(cause)
        return FarmError(f"{type(cause).__name__}: {cause}")
    lost = (
        rex.RayActorError,
        rex.NodeDiedError,
        rex.WorkerCrashedError,
        rex.OwnerDiedError,
        rex.LocalRayletDiedError,
        rex.ObjectLostError,
    )
    if isinstance(exc, lost):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return DeviceLostError(f"the unit's actor or node died ({type(exc).__name__}: {first[:200]})")
    if isinstance(exc, FarmError):
        return exc
    return FarmError(f"{type(exc).__name__}: {exc}")


def actor_died(exc: BaseException) -> bool:
    """Whether a call failed because the actor it went to is dead (not its node, not the job): a
    unit whose actor died takes no job until its agent registers it with a new actor."""
    import ray.exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        exc = exc.cause
    return isinstance(exc, rex.ActorDiedError)


def is_retryable(error: FarmError) -> bool:
    """A job that failed this way may succeed on another unit of its profile."""
    return isinstance(error, DeviceError) and error.retryable
