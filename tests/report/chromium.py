"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
no port, no network, no websocket library. Opens a file, collects console errors and uncaught
exceptions, evaluates expressions, takes a full-page screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
]
DEFAULT_TIMEOUT_S = 30.0


@dataclass
class PageResult:
    console_errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        reply = self.wait(lambda m: m.get("id") == self.next_id, timeout_s)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result") or {})

    def wait(self, match: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if match(message):
                    return dict(message)
                if "method" in message:
                    self.events.append(message)
            for event in list(self.events):
                if match(event):
                    self.events.remove(event)
                    return dict(event)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buffer += chunk


def open_page(
    html_path: Path, expressions: dict[str, str], screenshot: Path | None = None, width: int = 1280
) -> PageResult:
    """Load `html_path`, return console errors and the values of `expressions`."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    reader, writer = os.dup(to_child_r), os.dup(from_child_w)  # above 4, so dup2 never hits itself

    def wire() -> None:  # the protocol lives on fds 3 (commands in) and 4 (replies out)
        os.dup2(reader, 3)
        os.dup2(writer, 4)

    with tempfile.TemporaryDirectory(prefix="farm-chromium-") as profile:
        process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=False,
        )
        for fd in (to_child_r, from_child_w, reader, writer):
            os.close(fd)
        pipe = _Pipe(to_child_w, from_child_r)
        result = PageResult()
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
                pipe.send(domain, session=session)
            pipe.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            pipe.send("Page.navigate", {"url": html_path.resolve().as_uri()}, session=session)
            pipe.wait(lambda m: m.get("method") == "Page.loadEventFired")
            for name, expression in expressions.items():
                reply = pipe.send(
                    "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session
                )
                result.values[name] = reply.get("result", {}).get("value")
            if screenshot is not None:
                metrics = pipe.send("Page.getLayoutMetrics", session=session)
                height = int(metrics["cssContentSize"]["height"])
                shot = pipe.send(
                    "Page.captureScreenshot",
                    {
                        "format": "png",
                        "captureBeyondViewport": True,
                        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                    },
                    session=session,
                )
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            for event in pipe.events:
                method, params = event.get("method"), event.get("params") or {}
                if method == "Runtime.exceptionThrown":
                    result.console_errors.append(json.dumps(params.get("exceptionDetails", {}))[:300])
                elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    result.console_errors.append(json.dumps(params.get("args", []))[:300])
                elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                    result.console_errors.append(str(params["entry"].get("text")))
            with contextlib.suppress(TimeoutError, RuntimeError):
                pipe.send("Browser.close", timeout_s=5)
        finally:
            os.close(to_child_w)
            os.close(from_child_r)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        return result
