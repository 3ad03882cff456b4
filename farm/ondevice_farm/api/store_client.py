"""The controller's results store read over its submit API: `farm runs/show/report --address
http://HOST:PORT` on a host with the cluster token and no Ray (a CI runner that submitted there)."""

from __future__ import annotations

import json
from typing import Any

from ondevice_farm.api.client import ApiTarget, api_request
from ondevice_farm.api.wire import STORE_PATH, STORE_READS, error_from_event
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
        body = json.dumps({"method": method, "args": list(args), "kwargs": kwargs}).encode()
        json_type = {"Content-Type": "application/json"}
        with api_request(self.target, "POST", STORE_PATH, body, json_type) as answer:
            payload = answer.read()
            if answer.status != 200:
                raise SchedulingError(f"the farm controller at {self.target.url} answered {answer.status}")
        decoded: dict[str, Any] = json.loads(payload)
        if "error" in decoded:
            raise error_from_event(decoded["error"])
        result = decoded["result"]
        # run rows travel as plain objects
        if method == "runs":
            return [RunRow(**row) for row in result]
        return RunRow(**result) if method == "run" else result
