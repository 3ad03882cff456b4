"""Holding a model to a latency budget in a test suite: `assert_not_slower(base, candidate, ...)`
runs `compare` and fails with the verdict's evidence where B is slower than A on any device and
target (the paired sequential test of docs/compare.md: its false-alarm rate is the compare's alpha).

    def test_the_new_export_is_not_slower():
        ondevice_farm.assert_not_slower("model_v1.onnx", "model_v2.onnx", devices="host-cpu")
"""

from __future__ import annotations

from typing import Any

from ondevice_farm.python_api.comparing import Comparison, compare
from ondevice_farm.python_api.submitting import ModelLike


class SlowerError(AssertionError):
    """B is slower than A: pytest shows the message, each slower pair with its ratio and interval."""

    def __init__(self, comparison: Comparison) -> None:
        self.comparison = comparison
        lines = [f"{p.device} {p.target}: {p.evidence()}" for p in comparison.slower]
        super().__init__(
            f"{comparison.candidate} is slower than {comparison.baseline} on {len(lines)} pair(s):\n  "
            + "\n  ".join(lines)
        )


def assert_not_slower(
    baseline: ModelLike, candidate: ModelLike, *, allow_inconclusive: bool = True, **options: Any
) -> Comparison:
    """`compare(baseline, candidate, **options)`; an `AssertionError` (`SlowerError`) naming each
    pair judged slower, with B/A, its interval and the rounds it took. A pair that failed to run
    raises its error; `allow_inconclusive=False` also fails a pair the budget left undecided."""
    comparison = compare(baseline, candidate, **options)
    for pair in comparison.pairs:
        if pair.status != "ok":
            raise AssertionError(f"{pair.device} {pair.target}: no verdict ({pair.error})")
    if comparison.slower:
        raise SlowerError(comparison)
    undecided = [p for p in comparison.pairs if p.verdict == "inconclusive"]
    if undecided and not allow_inconclusive:
        raise AssertionError(
            "no verdict within the budget: "
            + "; ".join(f"{p.device} {p.target}: {p.evidence()}" for p in undecided)
        )
    return comparison
