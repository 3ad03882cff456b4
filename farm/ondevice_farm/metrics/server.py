"""`/metrics` over HTTP: what `farm serve` starts next to the controller.

prometheus_client's threading WSGI server on a thread of its own, answering with the farm's
collector only (never the process-global registry; `ondevice_farm.metrics.exposition` says how it stays
fast); bound to loopback unless the operator says otherwise (the metrics name devices and
models, which is lab business).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer

from ondevice_farm.errors import UsageError
from ondevice_farm.metrics.budget import DEFAULT_EXPORT_LIMITS, ExportLimits
from ondevice_farm.metrics.collector import FarmCollector
from ondevice_farm.metrics.disk import DiskUsage, WithDiskUsage
from ondevice_farm.metrics.exposition import CachedExposition
from ondevice_farm.metrics.fleet_state import FleetStateSource
from ondevice_farm.store_sql import StoreLocation

DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 9477
DEFAULT_STOP_TIMEOUT_S = 5.0
METRICS_PATH = "/metrics"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        # One line per scrape on stderr would drown `farm serve`'s own output.
        pass


def metrics_app(metrics: WsgiApp, others: WsgiApp | None = None) -> WsgiApp:
    """`/metrics` answers with the metrics; `/` points there; other paths go to `others`
    (`farm serve` passes the reports of stored runs), else 404."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == METRICS_PATH:
            return metrics(environ, start_response)
        if others is not None and path != "/":
            return others(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            more = ", reports of stored runs at /runs/" if others is not None else ""
            return [f"farm exporter: metrics at /metrics{more}\n".encode()]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: metrics are at /metrics\n"]

    return app


@dataclass
class MetricsServer:
    """A running `/metrics` endpoint. `stop()` closes the socket and the store; call it once."""

    host: str
    port: int
    collector: FarmCollector
    _server: ThreadingWSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{METRICS_PATH}"

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout_s)
        self.collector.close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_metrics_server(
    store_path: StoreLocation,
    host: str = DEFAULT_METRICS_HOST,
    port: int = DEFAULT_METRICS_PORT,
    fleet: FleetStateSource | None = None,
    others: WsgiApp | None = None,
    disk: DiskUsage | None = None,
    limits: ExportLimits = DEFAULT_EXPORT_LIMITS,
) -> MetricsServer:
    """Serve `farm_*` metrics of the store at `store_path` (and `fleet`, and the farm directory's
    `disk` use, when given) on host:port, within `limits` (docs/metrics.md, "Series budget").

    Port 0 picks a free port; the returned server's `.port` says which.
    """
    collector = FarmCollector(store_path, fleet, limits=limits)
    exposition = CachedExposition(collector)
    app = metrics_app(exposition if disk is None else WithDiskUsage(exposition, disk), others)

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = make_server(host, port, app, Server, handler_class=_QuietHandler)
    except OSError as exc:
        collector.close()
        raise UsageError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --metrics-port (0 picks a free one) or --metrics-host",
        ) from None
    thread = threading.Thread(target=server.serve_forever, name="farm-metrics", daemon=True)
    thread.start()
    return MetricsServer(host=host, port=int(server.server_port), collector=collector,
                         _server=server, _thread=thread)  # fmt: skip
