"""How often does a nightly fail on noise, and how large a slowdown does it catch?

    python benchmarks/regression.py [--recording FILE ...] [--record] [--quick]

Everything goes through the code `farm nightly` runs: `compare_sessions` per job (the
session-level test over the job's history), Benjamini-Hochberg across the suite, and
`latency_verdict` (adjusted p below alpha and the minimum effect).

1. A/A on real runs: benchmarks/fixtures/host_sessions.json (recorded while other work shared the
   two cores) and host_sessions_idle.json (nothing else running) hold real host-cpu sessions of
   six real models over six "nights" (benchmarks/record_sessions.py; `--record` records the
   idle one again, about a minute on an idle machine). Each night after the first is compared
   with the nights before it, as `farm nightly` would: nothing changed, so every flagged job is a false alarm.
2. Noise models: per-job noise fitted on that recording (within-session AR(1) samples,
   bimodal sessions, night-to-night drift), and two device models; simulated nightlies of 10,
   100 and 500 jobs give the share of A/A nights with any false alarm, and the power to flag a
   10% slowdown of one job, and of every job (a runtime upgrade), and 5% on the quiet model.
3. Repeats: the power at 100 jobs for K = 3, 5, 8 sessions per job (why suites default to 5).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ondevice_farm.analysis.multiple import benjamini_hochberg
from ondevice_farm.analysis.regression import RegressionPolicy
from ondevice_farm.analysis.session_test import LatencyCase, SessionComparison, compare_cases
from ondevice_farm.nightly.compare import latency_verdict

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = {
    "this host, shared": ROOT / "benchmarks" / "fixtures" / "host_sessions.json",
    "this host, idle": ROOT / "benchmarks" / "fixtures" / "host_sessions_idle.json",
}
#: earlier runs a job's comparison sees (farm/ondevice_farm/nightly/run.py HISTORY_RUNS)
HISTORY = 10
#: session p50s above the night's median by more than this count as the slow mode (log scale)
SLOW_MODE_LOG = float(np.log(1.15))
POLICY = RegressionPolicy()


@dataclass(frozen=True)
class JobNoise:
    """Log-scale noise of one job: samples AR(1) within a session, sessions bimodal plus normal,
    nights a random walk."""

    within_sd: float
    phi: float
    session_sd: float
    slow_prob: float
    slow_shift: float
    drift_sd: float


@dataclass(frozen=True)
class NoiseModel:
    name: str
    provenance: str
    jobs: tuple[JobNoise, ...]

    def job(self, index: int) -> JobNoise:
        return self.jobs[index % len(self.jobs)]


def _robust_sd(values: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


def fit(recording: dict[str, object]) -> dict[str, JobNoise]:
    """Per recorded model: the parameters of `JobNoise`, measured."""
    fitted: dict[str, JobNoise] = {}
    models = recording["models"]
    assert isinstance(models, dict)
    for name, sessions in models.items():
        within, phis, nights = [], [], {}
        for session in sessions:
            logs = np.log(np.asarray(session["samples_ms"], dtype=np.float64))
            within.append(_robust_sd(logs))
            x = logs - logs.mean()
            phis.append(float((x[1:] * x[:-1]).sum() / max((x * x).sum(), 1e-12)))
            nights.setdefault(session["night"], []).append(float(np.median(logs)))
        residuals, levels = [], []
        for p50s in nights.values():
            centre = float(np.median(p50s))
            residuals += [v - centre for v in p50s]
            levels.append(centre)
        r = np.asarray(residuals)
        slow = r > SLOW_MODE_LOG
        fitted[name] = JobNoise(
            within_sd=float(np.median(within)),
            phi=float(np.clip(np.median(phis), 0.0, 0.9)),
            session_sd=_robust_sd(r[~slow]) if (~slow).sum() > 2 else 0.0,
            slow_prob=float(slow.mean()),
            slow_shift=float(np.median(r[slow])) if slow.any() else 0.0,
            drift_sd=float(np.sqrt(np.mean(np.diff(levels) ** 2))),
        )
    return fitted


def noise_models(recorded: dict[str, dict[str, JobNoise]]) -> list[NoiseModel]:
    """The two device models (amplitudes estimated, AR(1) coefficient measured), then one model per
    recording with every parameter fitted on it."""
    phi = float(np.median([j.phi for fitted in recorded.values() for j in fitted.values()]))
    return [
        NoiseModel(
            "quiet device",
            f"estimated amplitudes (within 3%, sessions 1%, drift 0.3%/night); AR(1) phi {phi:.2f} measured",
            (JobNoise(0.03, phi, 0.01, 0.0, 0.0, 0.003),),
        ),
        NoiseModel(
            "noisy device",
            "estimated amplitudes (within 10%, 15% of sessions in a 6% slower mode, sessions 1.5%, "
            f"drift 0.7%/night); AR(1) phi {phi:.2f} measured",
            (JobNoise(0.10, phi, 0.015, 0.15, float(np.log(1.06)), 0.007),),
        ),
    ] + [
        NoiseModel(
            name, "measured: every parameter fitted per model on the recording", tuple(fitted.values())
        )
        for name, fitted in recorded.items()
    ]


class Simulator:
    """Nightlies of `jobs` jobs under one noise model: each night, K sessions of `runs` samples."""

    def __init__(self, model: NoiseModel, jobs: int, repeats: int, runs: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.noise = [model.job(i) for i in range(jobs)]
        self.repeats, self.runs = repeats, runs
        self.level = np.zeros(jobs)
        self.history: list[list[list[float]]] = [[] for _ in range(jobs)]

    def night(self) -> list[list[float]]:
        rng, k, n = self.rng, self.repeats, self.runs
        out = []
        for j, noise in enumerate(self.noise):
            self.level[j] += rng.normal(0.0, noise.drift_sd)
            innovation = noise.within_sd * np.sqrt(1.0 - noise.phi**2)
            x = np.empty((k, n))
            x[:, 0] = rng.normal(0.0, noise.within_sd, k)
            shocks = rng.normal(0.0, innovation, (k, n))
            for t in range(1, n):
                x[:, t] = noise.phi * x[:, t - 1] + shocks[:, t]
            session = rng.normal(0.0, noise.session_sd, k) + noise.slow_shift * (
                rng.random(k) < noise.slow_prob
            )
            out.append([float(v) for v in np.exp(self.level[j] + session + np.median(x, axis=1))])
        return out

    def step(self, slowdowns: tuple[float, ...]) -> tuple[bool, dict[float, tuple[bool, int]]]:
        """One night judged against the history as it is (A/A: did any job fail?) and, per slowdown,
        with job 0 alone slowed (caught?) and with every job slowed (how many caught); the history
        keeps the A/A night."""
        night = self.night()

        def cases(factor: float, jobs: int) -> list[LatencyCase]:
            return [
                LatencyCase("device", h, [v * (factor if j < jobs else 1.0) for v in s])
                for j, (h, s) in enumerate(zip(self.history, night, strict=True))
            ]

        alarm = "regressed" in verdicts(cases(1.0, 0))
        caught = {}
        for factor in slowdowns:
            one = verdicts(cases(factor, 1))[0] == "regressed"
            caught[factor] = (one, verdicts(cases(factor, len(night))).count("regressed"))
        for h, s in zip(self.history, night, strict=True):
            h.append(s)
            del h[:-HISTORY]
        return alarm, caught

    def warm_up(self) -> None:
        for _ in range(HISTORY):
            for h, s in zip(self.history, self.night(), strict=True):
                h.append(s)


def judged(cases: list[LatencyCase]) -> list[tuple[SessionComparison, str]]:
    """What `farm nightly` does with the jobs' latencies (farm/ondevice_farm/nightly/compare.py `_judge`):
    compared
    together, the p-values of those with a drift estimate adjusted across the suite, verdicts."""
    results = compare_cases(cases, POLICY.confidence)
    judged_at = [k for k, r in enumerate(results) if r.drift_from != "none"]
    slower = benjamini_hochberg([results[k].p_slower for k in judged_at])
    faster = benjamini_hochberg([results[k].p_faster for k in judged_at])
    out = [(r, "not compared") for r in results]
    for k, s, f in zip(judged_at, slower, faster, strict=True):
        out[k] = (results[k], latency_verdict(results[k].ratio, s, f, POLICY))
    return out


def verdicts(cases: list[LatencyCase]) -> list[str]:
    return [v for _, v in judged(cases)]


@dataclass
class Figures:
    jobs: int
    nights: int
    false_alarm_nights: int
    #: slowdown -> (share of nights the one slowed job was caught, share of all slowed jobs caught)
    power: dict[float, tuple[float, float]]

    def false_alarm_rate(self) -> float:
        return self.false_alarm_nights / self.nights

    def upper_95(self) -> float:
        """A one-sided 95% upper bound of the false-alarm rate (exact binomial; 3/n with none seen)."""
        n, k = self.nights, self.false_alarm_nights
        low, high = k / n, 1.0
        for _ in range(50):
            mid = (low + high) / 2
            tail = sum(
                float(np.exp(_log_comb(n, i) + i * np.log(mid) + (n - i) * np.log1p(-mid)))
                for i in range(k + 1)
            )
            low, high = (mid, high) if tail > 0.05 else (low, mid)
        return high


def _log_comb(n: int, k: int) -> float:
    from math import lgamma

    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)


def simulate(
    model: NoiseModel, jobs: int, nights: int, slowdowns: tuple[float, ...], repeats: int, runs: int
) -> Figures:
    sim = Simulator(model, jobs, repeats, runs, seed=jobs + repeats)
    sim.warm_up()
    alarms = 0
    one = dict.fromkeys(slowdowns, 0)
    every = dict.fromkeys(slowdowns, 0)
    for _ in range(nights):
        alarm, caught = sim.step(slowdowns)
        alarms += alarm
        for factor, (single, count) in caught.items():
            one[factor] += single
            every[factor] += count
    power = {f: (one[f] / nights, every[f] / (nights * jobs)) for f in slowdowns}
    return Figures(jobs, nights, alarms, power)


def replay(recording: dict[str, object]) -> None:
    """The recorded nights, in order, each compared with the nights before it (A/A on real runs)."""
    models = recording["models"]
    assert isinstance(models, dict)
    per_night: dict[int, dict[str, list[float]]] = {}
    for name, sessions in models.items():
        for s in sessions:
            per_night.setdefault(s["night"], {}).setdefault(name, []).append(
                float(np.median(s["samples_ms"]))
            )
    nights = sorted(per_night)
    flagged_nights, flagged_jobs, compared = 0, 0, 0
    for n in nights[1:]:
        names = sorted(per_night[n])
        cases = [
            LatencyCase("host-cpu", [per_night[m][name] for m in nights if m < n], per_night[n][name])
            for name in names
        ]
        outcome = judged(cases)
        said = [v for _, v in outcome]
        compared += len(said) - said.count("not compared")
        flagged_jobs += said.count("regressed")
        flagged_nights += "regressed" in said
        worst = max((r for r, _ in outcome), key=lambda r: r.ratio)
        print(
            f"  night {n + 1}: {len(names) - said.count('not compared')} of {len(names)} jobs judged, "
            f"flagged {said.count('regressed')}; largest change {(worst.ratio - 1) * 100:+.1f}% "
            f"(95% CI {worst.ci_low:.2f}-{worst.ci_high:.2f}x, p {worst.p_slower:.2g})"
        )
    print(
        f"A/A on real runs: {flagged_nights} of {len(nights) - 1} nights failed, "
        f"{flagged_jobs} of {compared} job comparisons flagged"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--recording",
        type=Path,
        action="append",
        help="a recording of sessions (default: both fixtures)",
    )
    parser.add_argument("--record", action="store_true", help="record the idle sessions again first")
    parser.add_argument("--quick", action="store_true", help="fewer simulated nights (a smoke run)")
    args = parser.parse_args()
    paths = {p.stem: p for p in args.recording} if args.recording else dict(RECORDINGS)
    if args.record:
        out = paths.get("this host, idle", next(iter(paths.values())))
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "record_sessions.py"), "--out", str(out)], check=True
        )
    started = time.perf_counter()
    print(
        f"policy: Benjamini-Hochberg at alpha {POLICY.alpha}, minimum effect {POLICY.min_effect:.0%}, "
        "K=5 sessions x 30 runs"
    )
    recorded: dict[str, dict[str, JobNoise]] = {}
    for name, path in paths.items():
        recording = json.loads(path.read_text())
        print(f"-- 1. A/A on the recorded real runs, {name} ({path.name})\n   {recording['provenance']}")
        replay(recording)
        recorded[name] = fit(recording)
        print(
            "   fitted per model (log scale): within sd, AR(1) phi, session sd, slow-mode share and shift, "
            "drift sd"
        )
        for model_name, j in recorded[name].items():
            print(
                f"  {model_name:22s} {j.within_sd:.3f} {j.phi:+.2f} {j.session_sd:.3f} "
                f"{j.slow_prob:.2f} {j.slow_shift:+.3f} {j.drift_sd:.3f}"
            )
    models = noise_models(recorded)
    scale = 0.25 if args.quick else 1.0
    nights_for = {10: int(1000 * scale), 100: int(300 * scale), 500: int(40 * scale)}
    print(
        "-- 2. simulated nightlies, K=5 sessions x 30 runs (false alarm: A/A nights with any job flagged, "
        "95% upper bound; power: the one slowed job / every job slowed)"
    )
    at_100: dict[str, Figures] = {}
    for model in models:
        print(f"{model.name}: {model.provenance}")
        slowdowns = (1.10, 1.05) if model.name == "quiet device" else (1.10,)
        for jobs, nights in nights_for.items():
            f = simulate(model, jobs, nights, slowdowns, 5, 30)
            if jobs == 100:
                at_100[model.name] = f
            power = "; ".join(
                f"{factor - 1:.0%} slower: one job {one:.0%}, every job {every:.0%}"
                for factor, (one, every) in f.power.items()
            )
            print(
                f"  {jobs:3d} jobs, {nights} nights: false alarm {f.false_alarm_rate():.2%} "
                f"({f.false_alarm_nights}, <= {f.upper_95():.1%}); {power}"
            )
    print("-- goal at 100 jobs: false alarm < 1% of nights, power >= 90% for a 10% slowdown")
    for name, f in at_100.items():
        one, every = f.power[1.10]
        met = f.false_alarm_rate() < 0.01 and every >= 0.9
        print(
            f"  {name}: false alarm {f.false_alarm_rate():.2%}, power {every:.0%} (every job slowed), "
            f"{one:.0%} (one job): {'met' if met else 'NOT met'}"
            + ("" if one >= 0.9 or not met else " for a suite-wide slowdown only")
        )
    print("-- 3. sessions per job on the noisy device, 100 jobs, 10% slower")
    noisy = models[1]
    for repeats in (3, 5, 8):
        f = simulate(noisy, 100, nights_for[100] // 2, (1.10,), repeats, 30)
        one, every = f.power[1.10]
        print(
            f"  K={repeats}: false alarm {f.false_alarm_rate():.2%} ({f.false_alarm_nights} of {f.nights}); "
            f"one job {one:.0%}, every job {every:.0%}"
        )
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
