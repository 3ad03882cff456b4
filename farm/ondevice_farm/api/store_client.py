"""The controller's results store read over its submit API: `farm runs/show/report --address
http://HOST:PORT` on a host with the cluster token and no Ray (a CI runner that submitted there);
and `farm cancel` the same way."""

from __future__ import annotations

import json
from typing import Any

from ondevice_farm.api.client import ApiTarget, api_request
from ondevice_farm.api.wire import CANCEL_PATH, STORE_PATH, STORE_READS, error_from_event
from ondevice_farm.controller.results import ForwardedStore
from ondevice_farm.errors import SchedulingError, UsageError
from ondevice_farm.store import RunRow


class ApiStore(ForwardedStore):
    """The read side of `RunStore`, one request a call; writing is the controller's alone."""

    def __init__(self, target: ApiTarget) -> None:
        self.target = target
        self.path = f"the controller's store at {target.url}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if method not in STORE_READS:
            raise UsageError("the submit API reads the controller's store; only the controller writes it")
        result = post_json(self.target, STORE_PATH, {"method": method, "args": list(args), "kwargs": kwargs})
        # run rows travel as plain objects
        if method == "runs":
            return [RunRow(**row) for row in result]
        return RunRow(**result) if method == "run" else result


def post_json(target: ApiTarget, path: str, call: dict[str, Any]) -> Any:
    """One JSON call of the submit API: its `result`, or the FarmError it answered with."""
    json_type = {"Content-Type": "application/json"}
    with api_request(target, "POST", path, json.dumps(call).encode(), json_type) as answer:
        payload = answer.read()
        if answer.status != 200:
            raise SchedulingError(f"the farm controller at {target.url} answered {answer.status}")
    decoded: dict[str, Any] = json.loads(payload)
    if "error" in decoded:
        raise error_from_event(decoded["error"])
    return decoded["result"]


def cancel_over_api(target: ApiTarget, run: str) -> tuple[str, int]:
    """`farm cancel RUN --address http://...`: the run's id and how many jobs it had left."""
    result = post_json(target, CANCEL_PATH, {"run": run})
    return str(result["run_id"]), int(result["left"])
