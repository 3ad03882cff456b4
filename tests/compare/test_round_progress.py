"""A paired job's progress lines: the first round at once, then at most one per interval, each
with the geometric mean B/A of the rounds so far."""

from __future__ import annotations

import math

from ondevice_farm.controller.round_progress import RoundReporter


def test_first_round_at_once_then_rate_limited() -> None:
    now = [0.0]
    sent: list[str] = []
    report = RoundReporter(sent.append, every_s=10.0, clock=lambda: now[0])
    pairs: list[tuple[float, float]] = []
    for second, (a, b) in enumerate([(1.0, 1.1)] * 25):
        now[0] = float(second)
        pairs.append((a, b))
        report(pairs)
    # rounds at t=0, 10, 20 only
    assert [line.split(",")[0] for line in sent] == ["round 1", "round 11", "round 21"]
    assert "B/A 1.100 so far" in sent[-1]


def test_ratio_is_the_geometric_mean_of_the_rounds() -> None:
    sent: list[str] = []
    RoundReporter(sent.append, every_s=0.0)([(1.0, 2.0), (2.0, 1.0), (1.0, 4.0)])
    expected = math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 3)
    assert f"B/A {expected:.3f} so far" in sent[0]


def test_a_failing_sender_never_fails_the_job() -> None:
    def broken(_text: str) -> None:
        raise RuntimeError("fleet gone")

    RoundReporter(broken, every_s=0.0)([(1.0, 1.0)])


def test_a_generation_job_names_each_metric() -> None:
    sent: list[str] = []
    ttft = [(1.0, 1.2), (1.0, 1.2)]
    per_token = [(0.05, 0.1), (0.05, 0.1)]  # time per decode token: B at half A's rate
    RoundReporter(sent.append, every_s=0.0)(ttft, {"TTFT B/A": ttft, "decode t/s A/B": per_token})
    assert sent == ["round 2, TTFT B/A 1.200, decode t/s A/B 2.000 so far (geometric means of the rounds)"]
