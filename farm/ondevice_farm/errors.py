"""Every error the farm raises on purpose.

    FarmError                 exit 1   root; carries a one-line message and a hint
    ├── UsageError            exit 2   bad command line: unknown device/target, bad --shape
    ├── ModelError            exit 3   model missing, not ONNX, truncated, fails onnx.checker
    ├── ProfileError          exit 4   a device profile YAML that is malformed or invalid
    ├── CompileError          exit 5   a target cannot be compiled (unsupported ops, ...)
    ├── DeviceError           exit 6   something went wrong on or with a device
    │   ├── DeviceLostError            the unit disconnected (retryable elsewhere)
    │   ├── DeviceTimeoutError         a call to the unit ran past its deadline (retryable)
    │   ├── DeviceAuthError            the unit refused us (keys, pairing)
    │   └── JobCancelledError          the job was stopped on its unit: its submission was cancelled
    ├── SchedulingError       exit 7   no unit can take a job before its deadline
    ├── StoreError            exit 8   the results store cannot be read or written
    └── ReferenceCheckError   exit 9   the run completed, but a job's outputs failed the reference check

Lower-layer errors (adb_shell, pymobiledevice3, onnxruntime, sqlite3) are converted
into these at the boundary of the layer that called them, so the CLI can print one
readable line and exit with a documented code.
"""

from __future__ import annotations

#: the project's name on PyPI, what `pip install` takes (the import name and the command differ);
#: scripts/rename_packages.py sets it
DISTRIBUTION = "ondevice-farm"


def install_hint(extra: str) -> str:
    """`pip install 'ondevice-farm[coreml]'`: how to get one optional part of the farm."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class FarmError(Exception):
    exit_code: int = 1
    default_hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        # Errors cross Ray's process boundary: keep the hint when pickled.
        return (_rebuild, (type(self), self.message, self.hint))


def _rebuild(cls: type[FarmError], message: str, hint: str) -> FarmError:
    return cls(message, hint=hint)


class UsageError(FarmError):
    exit_code = 2
    default_hint = "see `farm --help`"


class ModelError(FarmError):
    exit_code = 3
    default_hint = "pass a valid .onnx file (or a .mlpackage for CoreML targets)"


class ProfileError(FarmError):
    exit_code = 4
    default_hint = "fix the profile file; docs/device-profiles.md lists the fields"


class CompileError(FarmError):
    exit_code = 5


class DeviceError(FarmError):
    exit_code = 6
    #: a job that failed with a retryable error may run again on another unit
    retryable: bool = False


class DeviceLostError(DeviceError):
    retryable = True
    default_hint = "check the cable/connection; the job is retried on another unit of the profile"


class DeviceTimeoutError(DeviceError):
    retryable = True


class DeviceAuthError(DeviceError):
    default_hint = "accept the debugging prompt on the device, or check the host's keys"


class JobCancelledError(DeviceError):
    """A running job stopped on its unit because its submission was cancelled or abandoned."""

    default_hint = "resubmit the model; jobs that completed before the cancel are in the store"


class SchedulingError(FarmError):
    exit_code = 7
    default_hint = "`farm devices` lists the units that are up"


class StoreError(FarmError):
    exit_code = 8
    default_hint = "check FARM_HOME and its free space"


class ReferenceCheckError(FarmError):
    """Raised by the CLI after the run is complete and stored: the numbers disagree, nothing broke."""

    exit_code = 9
    default_hint = "`farm show RUN` lists each output's metrics; docs/results.md explains the verdict"


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        FarmError,
        UsageError,
        ModelError,
        ProfileError,
        CompileError,
        DeviceError,
        SchedulingError,
        StoreError,
        ReferenceCheckError,
    )
}
