"""The caches of a farm directory, their entries, and what each holds on disk.

Every cache is a directory of entries, each entry a file or a folder removed as a whole:

    artifacts/<sha[:2]>/<sha>/   source models and compiled artifacts (`farm/ondevice_farm/artifacts.py`);
                                 kept while a kept run, the nightly's baselines or a lease need them
    references/<key>.npz         host reference outputs (`farm/ondevice_farm/reference.py`)
    models/<sha>.v1.json         models' descriptions (`farm/ondevice_farm/model_cache.py`)
    compiled/<key>.json          ONNX Runtime compile reports (`farm/ondevice_farm/runtimes/ort/cache.py`)
    torch/{exports,references}/  PyTorch checkpoints' ONNX exports and eager outputs
    traces/                      Chrome traces written by `farm report --trace`
    uploads/<sha>/               models uploaded to `farm serve`'s submit API
    (`farm/ondevice_farm/api/blobs.py`) agent-artifacts/<sha>/       artifacts shipped to this host's units by
    a remote controller

All but `artifacts` can be made again from what the runs hold, so they go by age alone.
An entry's age is since its last use: the newer of its files' modification and access times
(Linux's default `relatime` updates the access time at least once a day; on a `noatime` mount it
is the time the entry was written), and of its folders' modification times (a job marks each
artifact it uses by its folder's: farm/ondevice_farm/gc/leases.py). Names starting with `.` are writers'
staging folders.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ondevice_farm.config import FarmHome

#: cache name -> (its directory under the farm directory, how deep its entries sit)
CACHE_LAYOUT: dict[str, tuple[str, int]] = {
    "artifacts": ("artifacts", 2),
    "references": ("references", 1),
    "models": ("models", 1),
    "compiled": ("compiled", 1),
    "torch": ("torch", 2),
    "traces": ("traces", 1),
    "uploads": ("uploads", 1),
    "agent-artifacts": ("agent-artifacts", 1),
}
#: the caches whose entries can be made again (compiled, computed, shipped or uploaded again)
REGENERABLE = tuple(name for name in CACHE_LAYOUT if name != "artifacts")


@dataclass(frozen=True)
class CacheEntry:
    cache: str
    path: Path
    size_bytes: int
    #: when it was last used (seconds since the epoch): see the module's docstring
    last_used_s: float

    @property
    def key(self) -> str:
        """`artifacts/<sha256>` for an artifact (the lease key), else the path in the farm directory."""
        if self.cache == "artifacts":
            return f"artifacts/{self.path.name}"
        return f"{CACHE_LAYOUT[self.cache][0]}/{self.path.name}"

    @property
    def staging(self) -> bool:
        """A writer's temporary folder (or one a crashed writer left)."""
        return self.path.name.startswith(".")


def _usage(path: Path) -> tuple[int, float]:
    """Bytes on disk (allocated blocks: what frees when removed) and the last use of `path`."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return 0, 0.0
    size, used = info.st_blocks * 512, _last_use(info)
    if stat.S_ISDIR(info.st_mode):
        linked: set[tuple[int, int]] = set()  # an upload's named links share its blob's blocks
        for folder, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                try:
                    child = os.lstat(os.path.join(folder, name))
                except FileNotFoundError:
                    continue
                if child.st_nlink > 1 and not stat.S_ISDIR(child.st_mode):
                    if (child.st_dev, child.st_ino) in linked:
                        continue
                    linked.add((child.st_dev, child.st_ino))
                size += child.st_blocks * 512
                used = max(used, _last_use(child))
    return size, used


def _last_use(info: os.stat_result) -> float:
    """A file's newer of modification and access; a folder's modification only (listing a folder,
    as this walk does, sets its access time)."""
    if stat.S_ISDIR(info.st_mode):
        return info.st_mtime
    return max(info.st_mtime, info.st_atime)


def _children(folder: Path, depth: int) -> Iterator[Path]:
    try:
        children = sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return
    for child in children:
        if depth <= 1 or child.name.startswith(".") or not child.is_dir():
            yield child
        else:
            yield from _children(child, depth - 1)


def cache_entries(home: FarmHome, cache: str) -> list[CacheEntry]:
    directory, depth = CACHE_LAYOUT[cache]
    entries = []
    for path in _children(home.root / directory, depth):
        size, used = _usage(path)
        entries.append(CacheEntry(cache, path, size, used))
    return entries


def cache_sizes(home: FarmHome) -> dict[str, int]:
    """Bytes on disk per cache, and `store` for the SQLite results store (with its WAL files)."""
    sizes = {name: _usage(home.root / directory)[0] for name, (directory, _) in CACHE_LAYOUT.items()}
    store = home.store_path
    sizes["store"] = sum(_usage(store.with_name(store.name + suffix))[0] for suffix in ("", "-wal", "-shm"))
    return sizes
