"""One job on the phone: write the job file, launch FarmRunner, wait for its result, pull it.

The app is launched through DVT process control with `--farm-job <path>`; it waits for a
nominal thermal state itself (`ProcessInfo.thermalState` is only visible in-process),
runs the model and writes its result file last and atomically. The host polls for that
file until the job's deadline, and notices an app that died without writing one. A job
cancelled meanwhile (`cancelled`, asked at every poll) ends the app through process control.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ondevice_farm.errors import DeviceError, DeviceTimeoutError, JobCancelledError
from ondevice_farm_agents.ios.container import JOBS_DIR, AppContainer
from ondevice_farm_agents.ios.contract import JOB_SCHEMA, RunnerResult, contract_errors, parse_result
from ondevice_farm_agents.ios.link import DeviceLink
from ondevice_farm_agents.ios.provider import ProcessControl

DEFAULT_POLL_S = 0.5
JOB_ARGUMENT = "--farm-job"


@dataclass(frozen=True)
class JobOutcome:
    result: RunnerResult
    outputs: dict[str, np.ndarray]


def run_job(
    link: DeviceLink,
    container: AppContainer,
    bundle_id: str,
    job: dict[str, Any],
    deadline_s: float,
    poll_s: float = DEFAULT_POLL_S,
    during: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> JobOutcome:
    """Run `job` (a document valid under the job schema) and bring back its result and outputs;
    `during` is entered around the app's run (the battery sampler); `cancelled` turning true ends
    the app and raises `JobCancelledError`."""
    problems = contract_errors(job, JOB_SCHEMA)
    if problems:
        raise DeviceError(
            f"the host built an invalid job file: {'; '.join(problems)}", hint="report this bug"
        )
    job_id: str = job["job_id"]
    job_dir = f"{JOBS_DIR}/{job_id}"
    container.write(f"{job_dir}/job.json", json.dumps(job, indent=1).encode())
    try:
        raw = _launch_and_wait(
            link,
            bundle_id,
            f"{job_dir}/job.json",
            job["result_path"],
            deadline_s,
            poll_s,
            during,
            cancelled,
        )
        result = parse_result(raw, job_id, f"{link.serial}: job {job_id}")
        total = sum(int(np.prod(o.shape)) * 8 for o in result.outputs)
        blobs = container.read_all([o.path for o in result.outputs], total)
        # under their ONNX names (the job's I/O name map, echoed by the app; the host's own map
        # where the app gave none): the reference diff compares like with like
        onnx_names = {o["name"]: o["onnx_name"] for o in job["outputs"]}
        outputs = {
            o.onnx_name or onnx_names.get(o.name, o.name): o.decode(blob)
            for o, blob in zip(result.outputs, blobs, strict=True)
        }
        if len(outputs) != len(result.outputs):
            raise DeviceError(
                f"{link.serial}: job {job_id}: two outputs of the result file carry one name",
                hint="rebuild FarmRunner from agents/ondevice_farm_agents/ios/FarmRunner for this farm"
                " version",
            )
    finally:
        _cleanup(container, job_dir)
    return JobOutcome(result, outputs)


def _launch_and_wait(
    link: DeviceLink,
    bundle_id: str,
    job_path: str,
    result_path: str,
    deadline_s: float,
    poll_s: float,
    during: Callable[[], AbstractAsyncContextManager[None]] | None,
    cancelled: Callable[[], bool],
) -> bytes:
    async def launch_and_wait() -> bytes:
        async with (during or nullcontext)(), link.provider.process_control(link.serial) as control:
            if cancelled():
                raise JobCancelledError(f"{link.serial}: the job was cancelled before FarmRunner started")
            pid = await control.launch(bundle_id, arguments=[JOB_ARGUMENT, job_path], kill_existing=True)
            try:
                async with link.provider.app_container(link.serial, bundle_id) as afc:
                    give_up = time.monotonic() + deadline_s
                    while True:
                        if await afc.exists(result_path):
                            return await afc.get_file_contents(result_path)
                        if cancelled():  # the `finally` below ends the app
                            raise JobCancelledError(f"{link.serial}: the job was cancelled; FarmRunner ended")
                        if await control.process_identifier_for_bundle_identifier(bundle_id) == 0:
                            # The app may have written its result just before exiting.
                            if await afc.exists(result_path):
                                return await afc.get_file_contents(result_path)
                            raise DeviceError(
                                f"{link.serial}: FarmRunner exited without writing a result",
                                hint="see the crash log: `pymobiledevice3 crash ls`",
                            )
                        if time.monotonic() >= give_up:
                            raise DeviceTimeoutError(
                                f"{link.serial}: FarmRunner wrote no result within {deadline_s:g} s"
                            )
                        await asyncio.sleep(poll_s)
            finally:
                await _kill_quietly(control, pid)

    return link.call(launch_and_wait(), "running the job", timeout_s=deadline_s + 2 * link.io_timeout_s)


async def _kill_quietly(control: ProcessControl, pid: int) -> None:
    # The app may be gone already, or the phone with it: the job's own error is the one to report.
    try:
        await control.kill(pid)
    except Exception:
        return


def _cleanup(container: AppContainer, job_dir: str) -> None:
    try:
        container.remove(job_dir)
    except DeviceError:
        # Leftover job directories are removed on the next prepare; the job's outcome stands.
        return
