"""The nightly compares tonight from its job summaries: it never reads tonight's run whole through
`store.jobs()`; `farm nightly --json` reads each job whole, one store call per job, as it writes it.

Two nights of tests/gc/history.py's in-process fleet (real host jobs, no Ray), through the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

import ondevice_farm.nightly.run as nightly_run
from ondevice_farm.cli.main import cli
from ondevice_farm.controller.results import RunStore
from tests.gc.history import simulated_farm, write_models

pytestmark = pytest.mark.slow

SCHEMA = Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json"


class CountingStore:
    """The nightly's store, counting the runs read whole and the jobs read one at a time."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self.whole_runs: list[str] = []
        self.single_jobs: list[str] = []

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        self.whole_runs.append(run_id)
        return self._store.jobs(run_id)

    def job(self, job_id: str, *, parts: tuple[str, ...] | None = None) -> dict[str, Any]:
        self.single_jobs.append(job_id)
        return self._store.job(job_id, parts=parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_tonight_is_compared_from_summaries_and_written_whole_one_job_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[CountingStore] = []
    real_run_store = nightly_run.run_store

    @contextmanager
    def counting_run_store(*args: Any) -> Iterator[CountingStore]:
        with real_run_store(*args) as store:
            opened.append(CountingStore(store))
            yield opened[-1]

    monkeypatch.setattr(nightly_run, "run_store", counting_run_store)
    with simulated_farm(tmp_path, monkeypatch) as month:
        documents = []
        for night in range(2):
            write_models(month.suite.parent, night, change_every=10)
            result = CliRunner().invoke(
                cli, ["--home", str(month.home.root), "nightly", str(month.suite), "--json"]
            )
            assert result.exit_code == 0, result.output[-2000:]
            documents.append(json.loads(result.stdout))

    second = documents[1]
    assert [s.whole_runs for s in opened] == [[], []]  # no run read whole, tonight's or another
    assert len(second["jobs"]) == 2 and second["comparison"]["baseline_run"] == documents[0]["run_id"]
    assert {e["status"] for e in second["comparison"]["jobs"]} == {"compared"}
    # the --json jobs are whole (the op table is a bulky part, not in a summary), each read alone
    assert sorted(opened[1].single_jobs) == sorted(j["job_id"] for j in second["jobs"])
    schema = json.loads(SCHEMA.read_text())
    for job in second["jobs"]:
        assert job["ops"]
        jsonschema.validate(job, {"$defs": schema["$defs"], "$ref": "#/$defs/ok_job"})
