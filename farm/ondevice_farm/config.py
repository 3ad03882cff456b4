"""Where the farm keeps its files, and the defaults of a job.

Values here are plain; the CLI reads `FARM_*` environment variables and passes them in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WARMUP_RUNS = 5
DEFAULT_TIMED_RUNS = 50
#: measurement sessions of a `farm submit` job: one, a quick look; a gate needs more
DEFAULT_REPEATS = 1
#: measurement sessions of a nightly job, the regression gate (docs/benchmarks.md: why 5)
DEFAULT_SUITE_REPEATS = 5
DEFAULT_SEED = 0
#: tries of a job whose unit disconnects or dies, on other units of its profile
DEFAULT_MAX_ATTEMPTS = 3
#: how long a job may wait while no unit of its profile is up, before it fails
DEFAULT_PLACEMENT_DEADLINE_S = 600.0
#: how long a job pinned to one unit waits while that unit is down (its node died, its actor
#: died, its agent no longer lists it) before it fails with the unit's reason
DEFAULT_UNIT_DOWN_DEADLINE_S = 45.0
#: a sustained run reports latency percentiles and telemetry per window of this length
DEFAULT_SUSTAINED_WINDOW_S = 5.0


def default_home() -> Path:
    """The user's cache dir (XDG), as a default only: `FARM_HOME` overrides it at the CLI."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "farm"


@dataclass(frozen=True)
class FarmHome:
    """The farm's directory: artifacts by hash, the results store, reference cache."""

    root: Path

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def references(self) -> Path:
        return self.root / "references"

    @property
    def store_path(self) -> Path:
        return self.root / "results.sqlite"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def models(self) -> Path:
        """Models' descriptions by content hash (`ondevice_farm.model_cache`)."""
        return self.root / "models"

    @property
    def compiled(self) -> Path:
        """ONNX Runtime compile reports by source hash and target (`ondevice_farm.runtimes.ort.cache`)."""
        return self.root / "compiled"

    @property
    def torch(self) -> Path:
        """PyTorch checkpoints' ONNX exports and eager references, by checkpoint hash."""
        return self.root / "torch"

    def ensure(self) -> FarmHome:
        for path in (self.root, self.artifacts, self.references, self.traces):
            path.mkdir(parents=True, exist_ok=True)
        return self
