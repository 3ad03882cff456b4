"""Leases on the farm directory's files: what a job uses, `farm gc` leaves in place.

A process that uses cached files (the pipeline: the source model and compiled artifacts in the
artifact store, the reference outputs) takes a lease: a file `leases/<pid>-<token>` under the
farm directory, locked (`flock`) for as long as the process holds it, listing the keys it uses
(`artifacts/<sha256>`, ...). A lease whose lock is free belongs to a process that died: `farm gc`
removes it and ignores what it listed.

One lock file, `gc.lock`, orders the two sides. A user finds or creates its files and records
them in its lease while holding the lock shared (`Lease.placing`); `farm gc` reads the leases and
moves what it removes out of the way while holding it exclusive (`LeaseBook.sweeping`). So a file
a user found is in its lease before gc can look, and a file gc moved away is gone before a user
can look: a user never finds a file that gc is about to take, nor one half deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

LEASES_DIR = "leases"
LOCK_FILE = "gc.lock"


def artifact_key(sha256: str) -> str:
    """A lease key: the artifact store's entry of `sha256`."""
    return f"artifacts/{sha256}"


class Lease:
    """Keys a live process uses; held (locked) from `LeaseBook.lease`'s start to its end."""

    def __init__(self, book: LeaseBook, handle: IO[str]) -> None:
        self._book = book
        self._handle = handle
        self.keys: set[str] = set()

    @contextmanager
    def placing(self) -> Iterator[Lease]:
        """Hold the gc lock shared: find or create files here, and `hold` them before leaving."""
        with self._book.locked(fcntl.LOCK_SH):
            yield self

    def hold(self, *keys: str) -> None:
        """Add `keys` to this lease (inside `placing`, so gc sees them before it removes anything)."""
        new = [k for k in keys if k not in self.keys]
        if not new:
            return
        self._handle.write("".join(f"{k}\n" for k in new))
        self._handle.flush()
        self.keys.update(new)

    def hold_artifacts(self, store_root: Path, sha256s: set[str]) -> None:
        """Hold these artifacts of the store at `store_root` and mark them used now (their
        folder's time): `farm gc` keeps what was used recently, lease or not."""
        self.hold(*(artifact_key(s) for s in sorted(sha256s)))
        for sha in sha256s:
            with contextlib.suppress(OSError):  # not in the store (a failed put): nothing to keep
                os.utime(store_root / sha[:2] / sha)


class LeaseBook:
    """The leases of one farm directory (`root`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.leases_dir = root / LEASES_DIR

    @contextmanager
    def locked(self, mode: int) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / LOCK_FILE).open("a") as handle:
            fcntl.flock(handle, mode)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def lease(self) -> Iterator[Lease]:
        """A lease of this process, released (and its file removed) at the end of the block."""
        self.leases_dir.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        path = self.leases_dir / name
        staged = self.leases_dir / f".{name}"
        with staged.open("w") as handle:
            # locked before it shows under its name: an unlocked lease file is a dead process's
            fcntl.flock(handle, fcntl.LOCK_EX)
            os.rename(staged, path)
            try:
                yield Lease(self, handle)
            finally:
                path.unlink(missing_ok=True)
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def sweeping(self) -> Iterator[set[str]]:
        """Hold the gc lock exclusive; the keys that live leases hold (dead ones are removed)."""
        with self.locked(fcntl.LOCK_EX):
            yield self.held_keys(prune=True)

    def held_keys(self, prune: bool = False) -> set[str]:
        """The keys of every live lease (without the gc lock: a snapshot, for plans and reports);
        `prune`: remove the dead ones' files."""
        held: set[str] = set()
        if not self.leases_dir.is_dir():
            return held
        for path in sorted(self.leases_dir.iterdir()):
            if path.name.startswith("."):  # a lease being taken: not yet locked under its name
                continue
            try:
                handle = path.open("r")
            except OSError:  # released while we looked
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # its process holds it: a live lease
                    held.update(line.strip() for line in handle if line.strip())
                    continue
                if prune:  # nobody holds it: its process died
                    path.unlink(missing_ok=True)
                fcntl.flock(handle, fcntl.LOCK_UN)
        return held
