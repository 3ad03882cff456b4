"""How a submission tells its progress: the CLI prints it, `farm serve` streams it to an API
submitter. Apart from the pipeline so the thin submitter loads it without numpy."""

from __future__ import annotations

from typing import Any, Protocol


class Progress(Protocol):
    def stage(self, text: str) -> None: ...
    def jobs_started(self, total: int) -> None: ...
    def job_finished(self, job: dict[str, Any]) -> None: ...


class SilentProgress:
    def stage(self, text: str) -> None:
        pass

    def jobs_started(self, total: int) -> None:
        pass

    def job_finished(self, job: dict[str, Any]) -> None:
        pass
