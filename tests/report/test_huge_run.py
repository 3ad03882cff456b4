"""A run of thousands of jobs read in bounded memory: `farm show` and `farm report` (terminal,
--json, HTML) read the run's job summaries a page at a time and whole jobs only for the window
they show in detail; `farm show --json` writes every job whole, one at a time.

The jobs are copies of a real stored host job (fixtures/host, 57 kB with its trace) under new
ids, two devices and two targets, one in 50 failed."""

from __future__ import annotations

import copy
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.results import ForwardedStore
from ondevice_farm.reports.web import reports_app
from ondevice_farm.run_reader import (
    DEFAULT_DETAIL_JOBS,
    DEFAULT_PAGE_JOBS,
    GroupTable,
    iter_job_summaries,
    load_run,
)
from ondevice_farm.store import ResultsStore, new_run_id

HOST_RUN = Path(__file__).parent / "fixtures" / "host" / "tinynet_busy_host.json"
SCHEMA = Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json"
SMALL, LARGE = 1000, 4000
FAILED_LACKS = ("latency_ms", "ops", "reference")


def _fill(home: Path, jobs: int) -> str:
    run = json.loads(HOST_RUN.read_text())
    template = run["jobs"][0]
    run_id = new_run_id()
    header = {k: v for k, v in run.items() if k not in ("jobs", "status", "created_at", "finished_at")}
    with ResultsStore(FarmHome(home).store_path) as store:
        store.start_run(run_id, "submit", {**header, "run_id": run_id})
        for index in range(jobs):
            job = copy.deepcopy(template)
            job.update(
                job_id=f"{run_id}-{index:06d}",
                run_id=run_id,
                device=f"unit-{index % 2}",
                target=("ort/cpu", "ort/xnnpack")[index // 2 % 2],
                finished_at=float(template["finished_at"]) + index,
            )
            if index % 50 == 49:  # a failed job keeps what it had before it ran
                job = {k: v for k, v in job.items() if k not in FAILED_LACKS}
                job.update(status="failed", error="the unit went away")
            store.add_job(run_id, job)
        store.finish_run(run_id, "partial")
    return run_id


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, str]]:
    made = {}
    for size in (SMALL, LARGE):
        home = tmp_path_factory.mktemp(f"huge{size}")
        made[size] = (home, _fill(home, size))
    return made


class WholeReads:
    """How many jobs were read whole (or with bulky parts) through the store."""

    def __init__(self) -> None:
        self.jobs = 0


@pytest.fixture
def whole_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[WholeReads]:
    counted = WholeReads()
    jobs, job = ResultsStore.jobs, ResultsStore.job

    def counting_jobs(self: ResultsStore, run_id: str) -> list[dict[str, Any]]:
        found = jobs(self, run_id)
        counted.jobs += len(found)
        return found

    def counting_job(
        self: ResultsStore, job_id: str, *, parts: tuple[str, ...] | None = None
    ) -> dict[str, Any]:
        counted.jobs += 1
        return job(self, job_id, parts=parts)

    monkeypatch.setattr(ResultsStore, "jobs", counting_jobs)
    monkeypatch.setattr(ResultsStore, "job", counting_job)
    yield counted


def _farm(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output[-2000:]
    return result.output


@pytest.mark.parametrize(
    "command",
    [("show",), ("report",), ("report", "--json"), ("report", "--html", "{home}/report.html")],
)
def test_views_read_whole_jobs_for_their_window_only(
    homes: dict[int, tuple[Path, str]], whole_reads: WholeReads, command: tuple[str, ...]
) -> None:
    home, run_id = homes[LARGE]
    output = _farm(home, command[0], run_id, *(c.format(home=home) for c in command[1:]))
    assert whole_reads.jobs <= DEFAULT_DETAIL_JOBS, f"{whole_reads.jobs} of {LARGE} jobs read whole"
    if command == ("report", "--json"):
        report = json.loads(output)
        assert len(report["columns"]) == DEFAULT_DETAIL_JOBS and report["jobs_total"] == LARGE
        groups = {(g["target"], g["jobs"], g["failed"]) for g in report["job_groups"]}
        assert groups == {("ort/cpu", LARGE // 2, LARGE // 100), ("ort/xnnpack", LARGE // 2, LARGE // 100)}
    elif command[1:2] == ("--html",):
        page = (home / "report.html").read_text()
        assert f"of {LARGE} shown in detail" in page and 'id="jobs"' in page
        assert len(page) < 5_000_000
    else:
        assert f"jobs 1-{DEFAULT_DETAIL_JOBS} of {LARGE} shown in detail" in output


def test_offset_moves_the_window(homes: dict[int, tuple[Path, str]]) -> None:
    home, run_id = homes[SMALL]
    report = json.loads(_farm(home, "report", run_id, "--json", "--offset", "990", "--jobs", "20"))
    assert [c["label"] for c in report["columns"]][:2] == ["unit-0 ort/xnnpack", "unit-1 ort/xnnpack"]
    assert len(report["columns"]) == 10 and report["jobs_offset"] == 990


def test_show_json_streams_every_job_whole(
    homes: dict[int, tuple[Path, str]], whole_reads: WholeReads
) -> None:
    home, run_id = homes[SMALL]
    document = json.loads(_farm(home, "show", run_id, "--json"))
    assert len(document["jobs"]) == SMALL and whole_reads.jobs == SMALL  # one at a time, each whole
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(document, schema)


def _report_peak_bytes(home: Path, run_id: str) -> int:
    tracemalloc.start()
    try:
        _farm(home, "report", run_id, "--json")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_report_memory_does_not_grow_with_the_run(homes: dict[int, tuple[Path, str]]) -> None:
    """Four times the jobs, much less than four times the memory: a run read whole (57 kB a job)
    would need 4x; a page of summaries, the window and the per-group p50s stay about the same."""
    small, large = (_report_peak_bytes(*homes[size]) for size in (SMALL, LARGE))
    print(f"farm report --json peak traced: {small / 1e6:.1f} MB at {SMALL}, {large / 1e6:.1f} MB at {LARGE}")
    assert large < 1.5 * small


def test_runs_page_is_a_window_with_links(
    homes: dict[int, tuple[Path, str]], whole_reads: WholeReads
) -> None:
    home, run_id = homes[LARGE]
    app = reports_app(FarmHome(home).store_path, FarmHome(home).artifacts)
    answered: list[str] = []
    body = b"".join(
        app(
            {"PATH_INFO": f"/runs/{run_id}", "QUERY_STRING": f"offset={DEFAULT_DETAIL_JOBS}"},
            lambda status, headers: answered.append(status),
        )
    ).decode()
    assert answered == ["200 OK"] and whole_reads.jobs <= DEFAULT_DETAIL_JOBS
    assert f"jobs {DEFAULT_DETAIL_JOBS + 1}-{2 * DEFAULT_DETAIL_JOBS} of {LARGE}" in body
    assert "offset=0" in body and f"offset={2 * DEFAULT_DETAIL_JOBS}" in body  # previous, next


class JsonForwarded(ForwardedStore):
    """A store elsewhere, its arguments and answers through JSON as the submit API sends them."""

    def __init__(self, store: ResultsStore) -> None:
        self.store, self.path = store, "elsewhere"
        self.calls: list[str] = []

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(method)
        args, kwargs = json.loads(json.dumps([args, kwargs]))
        return getattr(self.store, method)(*args, **kwargs)


def test_a_forwarded_store_pages_a_call_at_a_time(homes: dict[int, tuple[Path, str]]) -> None:
    home, run_id = homes[LARGE]
    with ResultsStore(FarmHome(home).store_path) as store:
        forwarded = JsonForwarded(store)
        document = load_run(forwarded, run_id, detail_jobs=3, offset=LARGE - 2)
        assert [j["job_id"] for j in document["jobs"]] == [
            f"{run_id}-{i:06d}" for i in (LARGE - 2, LARGE - 1)
        ]
        assert "ops" in document["jobs"][0] and "trace_events" not in document["jobs"][0]
    pages = -(-LARGE // DEFAULT_PAGE_JOBS) + (LARGE % DEFAULT_PAGE_JOBS == 0)
    assert forwarded.calls.count("run_job_rows") == pages and forwarded.calls.count("job") == 2
    # the per-(model, target) table is built from columns: no summary document crosses for it
    assert "jobs" not in forwarded.calls and "run_job_summaries" not in forwarded.calls


def test_the_group_table_from_columns_is_the_one_from_summaries(homes: dict[int, tuple[Path, str]]) -> None:
    home, run_id = homes[SMALL]
    with ResultsStore(FarmHome(home).store_path) as store:
        tables = []
        for columns_only in (False, True):
            groups = GroupTable()
            for job in iter_job_summaries(store, run_id, columns_only=columns_only):
                groups.add(job)
            tables.append(groups.rows())
    assert tables[0] == tables[1] and tables[0] and all(row["jobs"] for row in tables[0])
