"""The figures of benchmarks/lab_scale.py: goals (issue 34), the per-kind RSS table, the series
budget read off /metrics, and the printed table with each goal's PASS/FAIL beside its figure."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Any

RSS_RATIO_GOAL = 1.25
#: Ray's own processes: the 1.25x goal is the farm's processes'
RAY_OWN = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")
REPORT_GOAL_S, REPORT_GOAL_MIB = 30.0, 1024.0
SCRAPE_GOAL_S = 1.0
GC_GOAL_S = 300.0
SERIES_PER_COMBINATION_GOAL, LAB_SERIES_GOAL = 15, 200_000
LAB_COMBINATIONS = 40 * 100 * 3
LABELS = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def ok(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def series(body: str) -> list[dict[str, str]]:
    return [dict(LABELS.findall(line)) for line in body.splitlines() if line and not line.startswith("#")]


def series_budget(body: str) -> dict[str, Any]:
    """Series per (model, profile, target) on /metrics and the lab total they imply."""
    per: dict[tuple[str, str, str], int] = defaultdict(int)
    other = 0
    for labels in series(body):
        if "model" in labels and "target" in labels:
            per[(labels["model"], labels.get("device", ""), labels["target"])] += 1
        else:
            other += 1
    most = max(per.values(), default=0)
    return {
        "combinations": len(per),
        "max_per_combination": most,
        "median_per_combination": statistics.median(per.values()) if per else 0,
        "other_series": other,
        "lab_total_computed": most * LAB_COMBINATIONS + other,
    }


def slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0


def rss_table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind: its peak at each size, MiB per 1,000 jobs, largest / smallest; farm's own
    processes (farm *, the farm's ray:: actors) carry the 1.25x goal."""
    rows = []
    kinds = sorted({k for run in runs for k in run["rss_peak_mib"]})
    for kind in kinds:
        sized = [(run["jobs"], run["rss_peak_mib"][kind]) for run in runs if kind in run["rss_peak_mib"]]
        ratio = sized[-1][1] / sized[0][1] if len(sized) > 1 and sized[0][1] else None
        goal = kind.startswith(("farm ", "ray::")) and kind not in RAY_OWN
        rows.append({
            "kind": kind,
            "peak_mib": {str(j): round(m, 1) for j, m in sized},
            "mib_per_1000_jobs": slope([j / 1000 for j, _ in sized], [m for _, m in sized]),
            "ratio_largest_smallest": ratio,
            "verdict": ok(ratio <= RSS_RATIO_GOAL) if goal and ratio is not None else "-",
        })  # fmt: skip
    return rows


def print_figures(result: dict[str, Any]) -> None:
    print(f"\n{'size (jobs)':>12} {'stored':>7} {'once':>5} {'jobs/s':>7} {'lab rate':>8} {'kB/job':>7}"
          f" {'wall s':>7} {'scrape med/max ms':>18} {'series':>7}")  # fmt: skip
    for run in result["sizes"]:
        med, most = run["scrape_median_s"], run["scrape_max_s"]
        scrape_ms = f"{med * 1e3:.0f}/{most * 1e3:.0f}" if med is not None else "-"
        print(f"{run['jobs']:>12} {run['stored']:>7} {ok(run['stored_once']):>5} {run['jobs_per_s']:>7.2f}"
              f" {run['lab_rate_jobs_per_s']:>8.2f} {run['store_bytes_per_job'] / 1e3:>7.1f}"
              f" {run['nightly_wall_s']:>7.0f} {scrape_ms:>18} {run['scrape_series']:>7}")  # fmt: skip
    sizes = [str(run["jobs"]) for run in result["sizes"]]
    print(f"\npeak RSS MiB per process kind (sampled), goal largest/smallest <= {RSS_RATIO_GOAL}x")
    print(f"{'kind':<34}" + "".join(f" {s:>9}" for s in sizes) + f" {'MiB/1k jobs':>11} {'ratio':>6}  goal")
    for row in result["rss"]:
        peaks = "".join(
            f" {row['peak_mib'][s]:>9.1f}" if s in row["peak_mib"] else f" {'-':>9}" for s in sizes
        )
        ratio = f"{row['ratio_largest_smallest']:.2f}" if row["ratio_largest_smallest"] else "-"
        print(f"{row['kind'][:34]:<34}{peaks} {row['mib_per_1000_jobs']:>11.2f} {ratio:>6}  {row['verdict']}")
    print(f"\nlargest run ({sizes[-1]} jobs), through the submit API:")
    for name, fig in result["reading"].items():
        fast = fig["wall_s"] < REPORT_GOAL_S and fig["peak_rss_mib"] < REPORT_GOAL_MIB
        passed = fig["exit"] == 0 and fast
        print(f"  {name:<22} {fig['wall_s']:>7.2f} s  {fig['peak_rss_mib']:>7.1f} MiB peak"
              f"  goal < {REPORT_GOAL_S:.0f} s, < {REPORT_GOAL_MIB:.0f} MiB, exit 0: {ok(passed)}"
              f"{'' if fig['exit'] == 0 else ' (exit ' + str(fig['exit']) + ')'}")  # fmt: skip
    budget = result["series_budget"]
    within = budget["max_per_combination"] <= SERIES_PER_COMBINATION_GOAL
    print(
        f"  series per (model, profile, target): max {budget['max_per_combination']}, median"
        f" {budget['median_per_combination']} over {budget['combinations']} combinations"
        f"  goal <= {SERIES_PER_COMBINATION_GOAL}: {ok(within)}"
    )
    print(
        f"  lab total computed ({LAB_COMBINATIONS} combinations x max + {budget['other_series']} others):"
        f" {budget['lab_total_computed']}  goal <= {LAB_SERIES_GOAL}:"
        f" {ok(budget['lab_total_computed'] <= LAB_SERIES_GOAL)}"
    )
    hist = result.get("history")
    if hist:
        print(f"\nhistory: {hist['rows']} stored jobs ({hist['method']}, {hist['copies']} copies,"
              f" {hist['bulk_load_s']:.0f} s), {hist.get('parts_rows', '?')} with their bulky parts,"
              f" store {hist.get('store_bytes', 0) / 2**30:.1f} GiB")  # fmt: skip
        print(
            f"  scrape first {hist['scrape_first_s'] * 1e3:.0f} ms, median of 5"
            f" {hist['scrape_median_s'] * 1e3:.0f} ms, {hist['series']} series"
            f"  goal < {SCRAPE_GOAL_S:.0f} s: {ok(hist['scrape_median_s'] < SCRAPE_GOAL_S)}"
        )
        for name, shown in (("gc_dry_run", "gc --dry-run"), ("gc", "gc")):
            print(
                f"  farm {shown:<14}"
                f" {hist[name + '_s']:>7.1f} s, {hist[name + '_removals']} runs"
                f"  goal < {GC_GOAL_S:.0f} s: {ok(hist[name + '_s'] < GC_GOAL_S)}"
            )
        print(f"  rows after gc: {hist['rows_after_gc']}")
