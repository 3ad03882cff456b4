"""`farm gc` on a month of nightlies: the dry run lists what goes, gc frees it, and what it keeps
is still readable, renderable, and enough for the next nightly's paired baseline."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ondevice_farm.cli.main import cli
from ondevice_farm.run_reader import load_run
from ondevice_farm.store import ResultsStore

from .history import Month, run_month, run_night, simulated_farm

pytestmark = pytest.mark.slow


def farm(month: Month, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(month.home.root), *args], catch_exceptions=False)


def blocks_on_disk(root: Path) -> int:
    """Bytes allocated under `root`, as `du` counts them (independent of farm/ondevice_farm/gc/caches.py)."""
    total = 0
    for folder, dirs, files in os.walk(root):
        total += sum(os.lstat(os.path.join(folder, n)).st_blocks * 512 for n in (*dirs, *files))
    return total


def artifact_folders(month: Month) -> set[str]:
    return {p.name for p in month.home.artifacts.glob("*/*") if p.is_dir() and not p.name.startswith(".")}


def named_artifacts(documents: list[dict[str, Any]]) -> set[str]:
    """What the runs name: source models, compiled artifacts, paired baselines."""
    named = set()
    for document in documents:
        named.update(m["sha256"] for m in document["models"])
        for job in document["jobs"]:
            named.update({job["model"]["sha256"], job["artifact_sha256"]})
            named.update([job["paired_baseline"]["artifact_sha256"]] if "paired_baseline" in job else [])
    return named


def stored_run_ids(month: Month) -> set[str]:
    with ResultsStore(month.home.store_path) as store:
        return {r.run_id for r in store.runs(limit=1000)}


def test_a_month_of_nightlies_is_collected_and_what_stays_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with simulated_farm(tmp_path, monkeypatch) as month:
        run_month(month, nights=30, change_every=7)
        assert len(stored_run_ids(month)) == 30
        # the history is the nightly's own: changed jobs chose their last good artifact as baseline
        baselines = [j for d in month.documents for j in d["jobs"] if "paired_baseline" in j]
        assert len(baselines) == 4, [d["run_id"] for d in month.documents]
        before_folders, before_bytes = artifact_folders(month), blocks_on_disk(month.home.root)

        # keep a week, and the newest 5 successes of each job: nights 24-29 stay (6 days old and newer)
        kept_nights, gone_nights = month.nights[24:], month.nights[:24]
        dry = farm(month, "gc", "--dry-run", "--keep-runs", "5", "--keep-days", "7", "--json")
        assert dry.exit_code == 0, dry.output
        plan = json.loads(dry.stdout)
        listed_runs = {r["name"] for r in plan["removals"] if r["kind"] == "run"}
        assert listed_runs == set(gone_nights)
        needed = named_artifacts(month.documents[24:])
        only_old = named_artifacts(month.documents[:24]) - needed
        listed_artifacts = {Path(r["name"]).name for r in plan["removals"] if r["kind"] == "artifacts"}
        assert listed_artifacts == only_old and len(only_old) == 6  # 3 old versions: source + compiled
        # the regenerable caches of the old versions go too: reference outputs, descriptions, compiles
        kinds = {r["kind"] for r in plan["removals"]}
        assert {"references", "models", "compiled"} <= kinds
        listed_bytes = sum(r["size_bytes"] for r in plan["removals"] if r["kind"] != "run")
        assert listed_bytes > 0
        # a dry run removes nothing
        assert artifact_folders(month) == before_folders and len(stored_run_ids(month)) == 30
        text = farm(month, "gc", "--dry-run", "--keep-runs", "5", "--keep-days", "7")
        assert text.exit_code == 0 and "would remove 24 run(s)" in text.stdout
        assert all(sha[:2] in text.stdout for sha in only_old)

        done = farm(month, "gc", "--keep-runs", "5", "--keep-days", "7")
        assert done.exit_code == 0, done.output
        assert artifact_folders(month) == before_folders - only_old
        assert stored_run_ids(month) == set(kept_nights)
        freed = before_bytes - blocks_on_disk(month.home.root)
        assert abs(freed - listed_bytes) <= 64 * 1024, (freed, listed_bytes)
        assert not (month.home.root / ".gc-trash").exists() or not any(
            (month.home.root / ".gc-trash").iterdir()
        )

        # only the newest 2 successes of each job now: the series keep them however old they are
        again = farm(month, "gc", "--keep-runs", "2", "--keep-days", "0", "--json")
        assert again.exit_code == 0, again.output
        assert stored_run_ids(month) == set(month.nights[28:])
        listed = farm(month, "runs")
        assert listed.exit_code == 0 and all(run_id in listed.stdout for run_id in month.nights[28:])
        with ResultsStore(month.home.store_path) as store:
            for run_id in month.nights[28:]:
                run = load_run(store, run_id)
                assert len(run["jobs"]) == 2 and all(j["status"] == "ok" for j in run["jobs"])
        for run_id in month.nights[28:]:
            report = farm(month, "report", run_id, "--html", str(tmp_path / f"{run_id}.html"))
            assert report.exit_code == 0, report.output
            html = (tmp_path / f"{run_id}.html").read_text()
            assert run_id in html and "ort/cpu" in html and "host-cpu" in html

        # the next night's changed job still finds its last good artifact to run beside it
        last_good = next(j for j in month.documents[-1]["jobs"] if j["model"]["name"] == "changing")
        tonight = run_night(month, night=35, nights_ago=0, change_every=7)
        changed = next(j for j in tonight["jobs"] if j["model"]["name"] == "changing")
        assert changed["status"] == "ok"
        assert changed["paired_baseline"]["artifact_sha256"] == last_good["artifact_sha256"]


def cache_bytes(month: Month) -> int:
    return sum(
        blocks_on_disk(month.home.root / name)
        for name in ("artifacts", "references", "models", "compiled", "torch", "traces")
        if (month.home.root / name).exists()
    )


def test_max_bytes_removes_the_least_recently_used_and_never_a_series_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with simulated_farm(tmp_path, monkeypatch) as month:
        run_month(month, nights=30, change_every=7)
        total = cache_bytes(month)
        # a month is recent under --keep-days 60: only --max-bytes makes room, half of it
        half = farm(month, "gc", "--keep-runs", "2", "--keep-days", "60", "--max-bytes", str(total // 2))
        assert half.exit_code == 0, half.output
        assert cache_bytes(month) <= total // 2 + 64 * 1024
        kept = stored_run_ids(month)
        assert set(month.nights[28:]) <= kept and len(kept) < 30
        # runs go oldest first: what stays is the newest nights
        assert kept == set(month.nights[-len(kept) :])
        assert named_artifacts([d for d in month.documents if d["run_id"] in kept]) <= artifact_folders(month)

        # a limit the kept series cannot meet: everything else goes, they stay, and gc says so
        tight = farm(month, "gc", "--keep-runs", "2", "--keep-days", "60", "--max-bytes", "1")
        assert tight.exit_code == 0, tight.output
        assert "over --max-bytes: what is left is kept by the policy" in tight.stdout
        assert stored_run_ids(month) == set(month.nights[28:])
        assert named_artifacts(month.documents[28:]) == artifact_folders(month)
