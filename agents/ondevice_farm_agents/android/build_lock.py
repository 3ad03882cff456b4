"""One build of a native runner at a time per build directory, across processes.

Two agents on one lab host, or two test workers, may ask for the same runner at once; the build
removes and rewrites its directory, so without this one would delete what the other is compiling.
An advisory `flock` on a file beside the directory: the second waits, then finds the first's build.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Held while `directory` is checked, built or rebuilt; released on exit (and by the kernel
    when the process dies)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f".{directory.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
