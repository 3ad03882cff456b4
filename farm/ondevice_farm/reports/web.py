"""The reports of stored runs over HTTP, for `farm serve`: `/runs/` lists them, `/runs/<id>` is
one run's HTML report (`?against=<id>` puts a second run beside it; a run larger than a report's
window of jobs pages with `?offset=<n>`).

Rendering skips the host fp16 prediction (seconds per report); `farm report --html` has it.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.store_sql import StoreLocation, store_exists

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
RUNS_PATH = "/runs/"
INDEX_LIMIT = 200


def _send(start_response: StartResponse, status: str, body: str, kind: str = "text/html") -> list[bytes]:
    data = body.encode("utf-8")
    start_response(status, [("Content-Type", f"{kind}; charset=utf-8"), ("Content-Length", str(len(data)))])
    return [data]


def _index(store_path: StoreLocation) -> str:
    from ondevice_farm.store import ResultsStore

    with ResultsStore(store_path) as store:
        rows = [
            f'<tr><td><a href="{RUNS_PATH}{quote(r.run_id)}">{html.escape(r.run_id)}</a></td>'
            f"<td>{time.strftime('%Y-%m-%d %H:%M', time.gmtime(r.created_at))}</td>"
            f"<td>{html.escape(r.kind)}</td>"
            f"<td>{html.escape(str(r.document.get('model', {}).get('name') or r.suite or '-'))}</td>"
            f"<td>{html.escape(r.status)}</td></tr>"
            for r in store.runs(limit=INDEX_LIMIT)
        ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>farm runs</title></head><body>"
        "<h1>farm runs</h1><table><tr><th>run</th><th>when (UTC)</th><th>kind</th><th>model or suite</th>"
        "<th>status</th></tr>" + "".join(rows) + "</table></body></html>"
    )


def _report(
    store_path: StoreLocation, artifacts_root: Path, run_id: str, against_id: str | None, offset: int
) -> str:
    """The report of the run's window of jobs from `offset` (run_reader.DEFAULT_DETAIL_JOBS of
    them) and the table of all its jobs: a page's size does not grow with the run's."""
    from ondevice_farm.reports.document import build_report
    from ondevice_farm.reports.html import render_report
    from ondevice_farm.run_reader import load_run
    from ondevice_farm.store import ResultsStore

    with ResultsStore(store_path) as store:
        run = load_run(store, run_id, offset=offset)
        against = load_run(store, against_id) if against_id else None
    report = build_report(run, against, artifacts_root=artifacts_root, predict_precision=False)

    def page_link(start: int) -> str:
        query = {"offset": str(start), **({"against": against_id} if against_id else {})}
        return f"{RUNS_PATH}{quote(str(run['run_id']))}?{urlencode(query)}"

    return render_report(report, page_link=page_link)


def _offset(query: dict[str, list[str]]) -> int:
    raw = query.get("offset", ["0"])[0]
    if not raw.isdigit():
        raise UsageError(f"offset must be a whole number of jobs, not {raw!r}")
    return int(raw)


def reports_app(store_path: StoreLocation, artifacts_root: Path) -> WsgiApp:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if not path.startswith(RUNS_PATH):
            return _send(start_response, "404 Not Found", "not found: reports are at /runs/\n", "text/plain")
        run_id = path[len(RUNS_PATH) :].strip("/")
        try:
            if not store_exists(store_path):
                return _send(start_response, "404 Not Found", "no runs stored yet\n", "text/plain")
            if not run_id:
                return _send(start_response, "200 OK", _index(store_path))
            query = parse_qs(environ.get("QUERY_STRING") or "")
            against = query.get("against", [None])[0]
            page = _report(store_path, artifacts_root, run_id, against, _offset(query))
            return _send(start_response, "200 OK", page)
        except FarmError as exc:
            return _send(start_response, "404 Not Found", f"{exc.message}\n", "text/plain")

    return app
