"""The controller's results store read over its submit API: `farm runs/show/report --address
http://HOST:PORT` on a host with the cluster token and no Ray (a CI runner that submitted there)."""

from __future__ import annotations

import json
from typing import Any

from ondevice_farm.api.client import ApiTarget, api_request
from ondevice_farm.api.wire import STORE_PATH, error_from_event
from ondevice_farm.errors import SchedulingError, UsageError
from ondevice_farm.store import RunRow


class ApiStore:
    """The read side of `RunStore`, one request a call; writing is the controller's alone."""

    def __init__(self, target: ApiTarget) -> None:
        self.target = target
        self.path = f"the controller's store at {target.url}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        body = json.dumps({"method": method, "args": list(args), "kwargs": kwargs}).encode()
        with api_request(
            self.target, "POST", STORE_PATH, body, {"Content-Type": "application/json"}
        ) as answer:
            payload = answer.read()
            if answer.status != 200:
                raise SchedulingError(f"the farm controller at {self.target.url} answered {answer.status}")
        decoded: dict[str, Any] = json.loads(payload)
        if "error" in decoded:
            raise error_from_event(decoded["error"])
        return decoded["result"]

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise UsageError("the submit API reads the controller's store; only the controller writes it")

    start_run = add_job = finish_run = mark_interrupted = _read_only

    def runs(self, limit: int = 50, kind: str | None = None, suite: str | None = None) -> list[RunRow]:
        return [RunRow(**row) for row in self._call("runs", limit=limit, kind=kind, suite=suite)]

    def run(self, run_id: str) -> RunRow:
        return RunRow(**self._call("run", run_id))

    def resolve_run_id(self, prefix: str) -> str:
        return str(self._call("resolve_run_id", prefix))

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("jobs", run_id)
        return result

    def job_counts(self, run_id: str) -> dict[str, int]:
        result: dict[str, int] = self._call("job_counts", run_id)
        return result
