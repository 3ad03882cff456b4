"""The statistics tests run against the product with an error put in (paired_montecarlo.injected):
`python -m tests.compare.injected_errors [ERROR...]` prints pass or FAIL per test and error, the
table issue 39 asks for (about two minutes a column)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from . import paired_montecarlo as mc
from . import test_paired_error_rates as rates
from . import test_paired_generation_stats as generation
from . import test_paired_stats as stats

CASES: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
    ("look interval", rates.test_every_look_is_the_documented_interval, ()),
    *[
        (f"p_value[{e}]", rates.test_p_value_is_the_documented_anytime_p_value, (e,))
        for e in (0.0, 0.01, 0.03, 0.1)
    ],
    *[
        (f"A/A {name}", rates.test_an_a_a_pair_is_called_slower_or_faster_at_most_alpha_of_the_time, (name,))
        for name in mc.SCENARIOS
    ],
    ("power", rates.test_power_at_the_defaults, ()),
    ("judge figures", stats.test_judge_reports_ratio_interval_and_geometric_means, ()),
    ("rounds_to_decide", stats.test_rounds_to_decide_projects_beyond_the_rounds_run, ()),
    ("spending sums", stats.test_spending_sums_to_alpha, ()),
    ("generation interval", generation.test_each_metric_is_the_paired_interval_at_half_the_pairs_alpha, ()),
    ("nightly generation", generation.test_the_nightly_judges_a_changed_generation_job_on_both_metrics, ()),
    ("nightly fixed graph", generation.test_the_nightly_judges_a_changed_fixed_graph_at_its_stored_alpha, ()),
]


def main(errors: list[str]) -> None:
    for error in errors or ["none", *mc.INJECTED, "tenth"]:
        with mc.injected(error) if error != "none" else contextlib.nullcontext():
            mc.look_quantiles.cache_clear()
            for name, test, args in CASES:
                try:
                    test(*args)
                    print(f"{error:10s} {name:22s} pass", flush=True)
                except AssertionError as exc:
                    print(
                        f"{error:10s} {name:22s} FAIL {(str(exc).splitlines() or [''])[0][:100]}", flush=True
                    )
        mc.look_quantiles.cache_clear()


if __name__ == "__main__":
    main(sys.argv[1:])
