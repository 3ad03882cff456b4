"""Content-addressed files on the unit: `<root>/cache/<sha256>/<name>`, pushed once.

An entry counts only once its `complete` marker exists, and the marker is written only
after the device itself hashed the pushed bytes and they matched; a push cut short leaves
an entry without a marker, which is removed before the next use. Markers' mtimes record
last use, so the oldest entries go first when the cache is over its size limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ondevice_farm.artifacts import sha256_file
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.android.device_paths import DevicePaths, q
from ondevice_farm_agents.android.transport import AdbConnection

DEFAULT_CACHE_LIMIT_BYTES = 2 * 1024**3
MARKER = "complete"


@dataclass(frozen=True)
class CachedFile:
    local: Path
    name: str
    sha256: str
    size: int


def describe(local: Path, name: str | None = None, sha256: str | None = None) -> CachedFile:
    """A local file as the cache sees it; `sha256` is trusted when the caller has it already."""
    digest = sha256 or sha256_file(local)
    return CachedFile(local, name or local.name, digest, local.stat().st_size)


class PushCache:
    def __init__(
        self, conn: AdbConnection, paths: DevicePaths, limit_bytes: int = DEFAULT_CACHE_LIMIT_BYTES
    ) -> None:
        self.conn = conn
        self.paths = paths
        self.limit_bytes = limit_bytes

    def device_path(self, item: CachedFile) -> str:
        return f"{self.paths.entry(item.sha256)}/{self.paths.join(item.name).rsplit('/', 1)[1]}"

    def ensure(self, items: list[CachedFile]) -> list[str]:
        """Each item's device path, pushing those not already there and intact. Returns paths."""
        self._remove_incomplete()
        present = self._intact({i.sha256: i for i in items})
        for item in items:
            if item.sha256 not in present:
                self._push(item)
        self._touch([i for i in items if i.sha256 in present])
        self.evict(keep={i.sha256 for i in items})
        return [self.device_path(i) for i in items]

    def _intact(self, wanted: dict[str, CachedFile]) -> set[str]:
        if not wanted:
            return set()
        checks = " ".join(
            f"[ -f {q(self.paths.entry(sha))}/{MARKER} ] && sha256sum {q(self.device_path(item))};"
            for sha, item in wanted.items()
        )
        result = self.conn.shell(f"{checks} true")
        seen = set()
        for line in result.output.splitlines():
            digest, _, path = line.strip().partition("  ")
            for sha, item in wanted.items():
                if path == self.device_path(item) and digest == sha:
                    seen.add(sha)
        return seen

    def _push(self, item: CachedFile) -> None:
        entry = self.paths.entry(item.sha256)
        target = self.device_path(item)
        partial = f"{target}.part"
        prep = self.conn.shell(f"rm -rf {q(entry)} && mkdir -p {q(entry)}")
        if not prep.ok:
            raise DeviceError(f"{self.conn.serial}: cannot create {entry}: {prep.output.strip()}")
        self.conn.push(item.local, partial)
        check = self.conn.shell(f"stat -c %s {q(partial)} && sha256sum {q(partial)}")
        lines = check.output.split()
        if not check.ok or len(lines) < 2 or lines[0] != str(item.size) or lines[1] != item.sha256:
            self.conn.shell(f"rm -rf {q(entry)}")
            raise DeviceError(
                f"{self.conn.serial}: {item.name} arrived damaged (size/sha256 {lines[:2]} != "
                f"{item.size} {item.sha256[:12]}...)"
            )
        done = self.conn.shell(f"mv {q(partial)} {q(target)} && touch {q(entry)}/{MARKER}")
        if not done.ok:
            raise DeviceError(f"{self.conn.serial}: cannot complete {entry}: {done.output.strip()}")

    def _touch(self, items: list[CachedFile]) -> None:
        if items:
            self.conn.shell(
                " ".join(f"touch {q(self.paths.entry(i.sha256))}/{MARKER};" for i in items) + " true"
            )

    def _remove_incomplete(self) -> None:
        cache = q(self.paths.cache)
        self.conn.shell(
            f'mkdir -p {cache} && for d in {cache}/*/; do [ -d "$d" ] && [ ! -f "${{d}}{MARKER}" ] '
            f'&& rm -rf "$d"; done; true'
        )

    def entries(self) -> list[tuple[str, int, int]]:
        """(sha256, bytes, last-use epoch seconds) of each complete entry."""
        cache = q(self.paths.cache)
        listing = self.conn.shell(
            f'for d in {cache}/*/; do [ -f "${{d}}{MARKER}" ] || continue; '
            f'echo "$(basename "$d") $(stat -c %Y "${{d}}{MARKER}") $(du -sk "$d" | cut -f1)"; done; true'
        )
        rows = []
        for line in listing.output.splitlines():
            parts = line.split()
            if len(parts) == 3 and all(p.isdigit() for p in parts[1:]):
                rows.append((parts[0], int(parts[2]) * 1024, int(parts[1])))
        return rows

    def evict(self, keep: set[str]) -> list[str]:
        """Remove least recently used entries (never those in `keep`) until under the limit."""
        rows = sorted(self.entries(), key=lambda r: r[2])
        total = sum(r[1] for r in rows)
        removed = []
        for sha, size, _ in rows:
            if total <= self.limit_bytes:
                break
            if sha in keep:
                continue
            self.conn.shell(f"rm -rf {q(self.paths.entry(sha))}")
            removed.append(sha)
            total -= size
        return removed
