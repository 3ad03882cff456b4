"""Capture what ONNX Runtime's C++ logger prints while a session is created.

ORT's default log sink writes to the process's file descriptor 2, not to Python's `sys.stderr`,
so the only way to read its placement and copy lines from Python is to point fd 2 at a file for
the duration of the call. Used around session creation only, never around timed runs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: ORT's log levels: 0 verbose (node placements), 1 info (copies, missing kernels), 2 warning, 3 error
VERBOSE = 0
#: onnxruntime's own default for its process-wide logger
ORT_DEFAULT_SEVERITY = 2


@dataclass
class CapturedLog:
    text: str = ""


@contextmanager
def captured_native_log() -> Iterator[CapturedLog]:
    """`with captured_native_log() as log: ...` then `log.text`: everything written to fd 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    captured = CapturedLog()
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


@contextmanager
def verbose_ort_logging() -> Iterator[None]:
    """Lower ORT's process-wide log level (missing-kernel lines go to it, not to the session's).

    onnxruntime has no getter for that level, so it is set back to ORT's own default afterwards.
    """
    import onnxruntime as ort

    ort.set_default_logger_severity(VERBOSE)
    try:
        yield
    finally:
        ort.set_default_logger_severity(ORT_DEFAULT_SEVERITY)
