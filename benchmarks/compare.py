"""Does `farm compare` call an unchanged model slower, and how often does it catch a real slowdown?

    python benchmarks/compare.py [--trials N] [--quick] [--json] [--simulated-only]

Everything is judged by the code `farm compare` runs: `run_paired_rounds`
(agents/ondevice_farm_agents/paired.py) on a
`HostAgent` unit, every session a fresh process (agents/ondevice_farm_agents/host/session.py), the compare's
defaults (1 intra-op thread, pinned as `--pin auto` pins: `resolve_affinity`, 50 timed runs after 5
warm-up, 600 s of device time, at most 40 rounds here: `--max-rounds`) and its stopping rule,
`farm.analysis.paired.decided` under `PairedPolicy()` (alpha 1%, min effect 3%).

1. Real host runs (measured). Two real models, `cnn192` (a MobileNetV2-style CNN at 192x192
   built with onnx's helpers, ~5 ms at one thread) and `examples/tinynet.onnx` (~0.7 ms), and
   slower variants of each: the same graph with a branch of real work off its last feature map
   (a 1x1 convolution of k output channels, reduced and added x1e-9 to the output), k calibrated
   for +5% and +10%. Their true slowdown is measured with a bare `InferenceSession.run` loop in
   one process (same thread and pinning), the models interleaved in random order, block by block.
   Then `--trials` compares each of A/A (two copies of the file), A/A+5% and A/A+10%.
2. Resampled from those rounds (measured noise, synthetic compares): the real compares' round
   log ratios drawn with replacement into many more compares, for false-alarm rates below 1%.
3. Recorded noise (synthetic): benchmarks/fixtures/host_sessions_idle.json's session p50s (6 models
   x 6 nights x 5 sessions, default threads, not pinned), a round's A and B drawn from a model's
   within-night residuals around a shared night level, times the effect; families of 1, 10 and 100
   pairs, each pair judged at alpha / m (`PairedPolicy().for_family(m)`).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.make_tinynet import GraphBuilder
from ondevice_farm.analysis.paired import MIN_STANDARD_ERROR, PairedPolicy, decided, judge
from ondevice_farm.analysis.student_t import t_quantile
from ondevice_farm.config import DEFAULT_TIMED_RUNS, DEFAULT_WARMUP_RUNS
from ondevice_farm.controller.compare import (
    AUTO_AFFINITY,
    DEFAULT_BUDGET_S,
    DEFAULT_COMPARE_THREADS,
    DEFAULT_MAX_ROUNDS,
    resolve_affinity,
)
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, DeviceUnit, PairedPlan, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.paired import run_paired_rounds, session_p50

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "benchmarks" / "fixtures" / "host_sessions_idle.json"
TINYNET = ROOT / "examples" / "tinynet.onnx"
SEED = 20261202
EFFECTS = (0.0, 0.05, 0.10)
#: k of the probe variant the calibration times (1x1 conv output channels)
PROBE_CHANNELS = 4096
#: the branch's contribution to the output: real work, invisible in the result
BRANCH_SCALE = 1e-9
FAMILIES = (1, 10, 100)
#: a real compare's rounds here (fewer than the compare's 200, to bound the benchmark's time: an
#: A/A pair can only reach `same` once the interval fits inside +-3%); part 2 resamples to 200
REAL_MAX_ROUNDS = 40
CONDITION = {0.0: "A/A", 0.05: "A/A+5%", 0.10: "A/A+10%"}


# ---------------------------------------------------------------- models and their slower twins


def build_cnn(resolution: int = 192, classes: int = 100) -> onnx.ModelProto:
    """MobileNetV2-style: stem, nine inverted residual blocks (expand 6), 1x1 head, pool, Gemm."""
    g = GraphBuilder(SEED)
    stages = [(16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 2), (32, 32, 1), (32, 64, 2)]
    stages += [(64, 64, 1), (64, 96, 1), (96, 160, 2)]
    x = g.conv_bn("image", 3, 16, 3, 2, 1, act=True)
    for cin, cout, stride in stages:
        x = g.inverted_residual(x, cin, cout, stride, expand=6)
    x = g.conv_bn(x, 160, 640, 1, 1, 1, act=True)
    w, b = g.const("fc.w", g.rng.normal(0, 0.05, (classes, 640))), g.const("fc.b", np.zeros(classes))
    g.nodes += [
        helper.make_node("GlobalAveragePool", [x], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["features"], axis=1),
        helper.make_node("Gemm", ["features", w, b], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        g.nodes,
        "cnn192",
        [helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, [1, 3, resolution, resolution])],
        [helper.make_tensor_value_info("probabilities", onnx.TensorProto.FLOAT, [1, classes])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def with_extra_compute(model: onnx.ModelProto, channels: int) -> onnx.ModelProto:
    """The same graph plus real work: a 1x1 conv of `channels` outputs off the last feature map
    (GlobalAveragePool's input), reduced to a scalar and added x1e-9 to the first output."""
    slower = onnx.ModelProto()
    slower.CopyFrom(model)
    g = slower.graph
    pool = next(n for n in g.node if n.op_type == "GlobalAveragePool")
    features = pool.input[0]
    shapes = onnx.shape_inference.infer_shapes(model).graph.value_info
    cin = next(v for v in shapes if v.name == features).type.tensor_type.shape.dim[1].dim_value
    out = g.output[0].name
    producer = next(n for n in g.node if out in n.output)
    producer.output[list(producer.output).index(out)] = f"{out}.base"
    rng = np.random.default_rng(SEED + channels)
    g.initializer.extend(
        [
            numpy_helper.from_array(
                rng.normal(0, cin**-0.5, (channels, cin, 1, 1)).astype(np.float32), "extra.w"
            ),
            numpy_helper.from_array(np.array(BRANCH_SCALE, dtype=np.float32), "extra.scale"),
        ]
    )
    g.node.extend(
        [
            helper.make_node("Conv", [features, "extra.w"], ["extra.conv"], kernel_shape=[1, 1]),
            helper.make_node("ReduceMean", ["extra.conv"], ["extra.mean"], keepdims=0),
            helper.make_node("Mul", ["extra.mean", "extra.scale"], ["extra.scaled"]),
            helper.make_node("Add", [f"{out}.base", "extra.scaled"], [out]),
        ]
    )
    onnx.checker.check_model(slower, full_check=True)
    return slower


@dataclass
class BareLoop:
    """Sessions of several models in this process, timed in interleaved blocks (random order)."""

    paths: list[Path]
    inputs: dict[str, np.ndarray]
    cpus: tuple[int, ...] | None
    sessions: list[Any] = field(default_factory=list)
    #: the first model's median block p50 in the last `ratios`
    base_p50_ms: float = 0.0

    def __post_init__(self) -> None:
        import onnxruntime as ort

        if self.cpus:
            os.sched_setaffinity(0, self.cpus)  # before the sessions start their threads
        for path in self.paths:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = DEFAULT_COMPARE_THREADS
            options.log_severity_level = 3
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            for _ in range(10):
                session.run(None, self.inputs)
            self.sessions.append(session)

    def ratios(self, blocks: int, runs: int, rng: np.random.Generator) -> list[tuple[float, float, float]]:
        """Per model after the first: (geometric mean of its block p50 / the first's, 95% CI)."""
        logs = np.zeros((blocks, len(self.sessions)))
        for block in range(blocks):
            for index in rng.permutation(len(self.sessions)):
                samples = []
                for _ in range(runs):
                    start = time.perf_counter_ns()
                    self.sessions[index].run(None, self.inputs)
                    samples.append(time.perf_counter_ns() - start)
                logs[block, index] = math.log(float(np.median(samples)))
        self.base_p50_ms = math.exp(float(np.median(logs[:, 0]))) / 1e6
        out = []
        for index in range(1, len(self.sessions)):
            d = logs[:, index] - logs[:, 0]
            half = 1.96 * float(d.std(ddof=1)) / math.sqrt(blocks)
            out.append((math.exp(d.mean()), math.exp(d.mean() - half), math.exp(d.mean() + half)))
        return out

    def close(self) -> None:
        self.sessions.clear()
        os.sched_setaffinity(0, range(os.cpu_count() or 1))


# ---------------------------------------------------------------- 1. real host runs


@dataclass
class Trial:
    model: str
    effect: float
    verdict: str
    ratio: float
    rounds: int
    elapsed_s: float
    stopped: str
    log_ratios: list[float]


def _request(path: Path, inputs: dict[str, np.ndarray], cpus: tuple[int, ...] | None) -> RunRequest:
    return RunRequest(
        artifact=path,
        artifact_sha256="",
        target=Target.parse("ort/cpu"),
        inputs=inputs,
        warmup=DEFAULT_WARMUP_RUNS,
        runs=DEFAULT_TIMED_RUNS,
        profile_ops=False,
        intra_op_threads=DEFAULT_COMPARE_THREADS,
        cpu_affinity=cpus,
    )


def real_compare(
    agent: HostAgent, unit: DeviceUnit, a: RunRequest, b: RunRequest, seed: int, max_rounds: int
) -> tuple[str, float, int, float, str, list[float]]:
    policy = PairedPolicy()
    plan = PairedPlan(
        baseline=a,
        max_rounds=max_rounds,
        budget_s=DEFAULT_BUDGET_S,
        seed=seed,
        decided=functools.partial(decided, policy=policy),
        min_rounds=policy.min_rounds,
    )
    trace = run_paired_rounds(agent, unit, b, plan)
    pairs = [(session_p50(r.baseline_samples_ms), session_p50(r.candidate_samples_ms)) for r in trace.rounds]
    verdict = judge(pairs, policy)
    logs = [math.log(bb / aa) for aa, bb in pairs]
    return verdict.verdict, verdict.ratio, verdict.rounds, trace.elapsed_s, trace.stopped, logs


def real_runs(trials: int, models: list[str], max_rounds: int, blocks: int, log: Any) -> dict[str, Any]:
    profiles = load_profiles()
    cpus = resolve_affinity(AUTO_AFFINITY, profiles["host-cpu"], DEFAULT_COMPARE_THREADS)
    agent = HostAgent(AgentSettings(profiles=profiles))
    unit = agent.discover()[0]
    rng = np.random.default_rng(SEED)
    result: dict[str, Any] = {"pinned_cpus": list(cpus) if cpus else None, "models": {}, "trials": []}
    with tempfile.TemporaryDirectory(prefix="farm-compare-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name in models:
            base = build_cnn() if name == "cnn192" else onnx.load(TINYNET)
            paths = {
                "A": tmp / f"{name}.onnx",
                "A'": tmp / f"{name}.copy.onnx",
                "probe": tmp / f"{name}.probe.onnx",
            }
            onnx.save(base, paths["A"])
            shutil.copyfile(paths["A"], paths["A'"])
            onnx.save(with_extra_compute(base, PROBE_CHANNELS), paths["probe"])
            info = inspect_model(paths["A"])
            inputs = seeded_inputs(info, resolve_shapes(info, {}), 0)
            runs_per_block = 5 if name == "cnn192" else 20
            loop = BareLoop([paths["A"], paths["probe"]], inputs, cpus)
            probe = loop.ratios(100, runs_per_block, rng)[0][0]
            loop.close()
            per_channel = max(probe - 1.0, 1e-4) / PROBE_CHANNELS
            channels = {e: max(1, round(e / per_channel)) for e in EFFECTS if e}
            for effect, k in channels.items():
                paths[f"B{effect:.2f}"] = tmp / f"{name}.plus{k}.onnx"
                onnx.save(with_extra_compute(base, k), paths[f"B{effect:.2f}"])
            bare = [paths["A"], paths["A'"], *(paths[f"B{e:.2f}"] for e in channels)]
            loop = BareLoop(bare, inputs, cpus)
            start = time.perf_counter()
            true = loop.ratios(blocks, runs_per_block, rng)
            p50 = loop.base_p50_ms
            loop.close()
            result["models"][name] = {
                "p50_ms": p50,
                "extra_channels": {f"{e:.2f}": k for e, k in channels.items()},
                "true_ratio": {
                    f"{e:.2f}": {"ratio": r, "ci95": [lo, hi]}
                    for e, (r, lo, hi) in zip(EFFECTS, true, strict=True)
                },
                "bare_loop_s": time.perf_counter() - start,
            }
            log(
                f"{name}: bare-loop p50 {p50:.2f} ms; true ratios "
                + ", ".join(
                    f"{CONDITION[e]} {r:.3f} [{lo:.3f}, {hi:.3f}]"
                    for e, (r, lo, hi) in zip(EFFECTS, true, strict=True)
                )
            )
            requests = {key: _request(path, inputs, cpus) for key, path in paths.items()}
            for trial in range(trials):
                for effect in rng.permutation(EFFECTS):
                    b = requests["A'"] if effect == 0 else requests[f"B{effect:.2f}"]
                    seed = int(rng.integers(2**31))
                    verdict, ratio, rounds, elapsed, stopped, logs = real_compare(
                        agent, unit, requests["A"], b, seed, max_rounds
                    )
                    result["trials"].append(
                        Trial(name, float(effect), verdict, ratio, rounds, elapsed, stopped, logs).__dict__
                    )
                    log(
                        f"  {name} {CONDITION[float(effect)]:8} trial {trial + 1}/{trials}: {verdict:12} "
                        f"ratio {ratio:.3f} after {rounds} rounds, {elapsed:.1f} s, "
                        f"sd {np.std(logs, ddof=1):.4f} (load {os.getloadavg()[0]:.2f})"
                    )
    return result


# ---------------------------------------------------------------- the stopping rule, vectorised


@functools.cache
def _quantiles(alpha: float, rounds: int) -> np.ndarray:
    """t quantile of each look's interval (inf where no alpha is spent), index = rounds - 1."""
    policy = PairedPolicy(alpha=alpha)
    q = np.full(rounds, np.inf)
    for n in range(2, rounds + 1):
        spend = policy.look_alpha(n)
        if spend > 0:
            q[n - 1] = t_quantile(1.0 - spend / 2.0, n - 1)
    return q


def sequential(d: np.ndarray, policy: PairedPolicy) -> tuple[np.ndarray, np.ndarray]:
    """`decided`/`judge` over rows of log ratios at once: (verdict codes 0 slower, 1 faster,
    2 same, 3 inconclusive at the last round; the round each stopped at)."""
    trials, rounds = d.shape
    n = np.arange(1, rounds + 1)
    total = np.cumsum(d, axis=1)
    mean = total / n
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.cumsum(d * d, axis=1) - n * mean * mean) / (n - 1)
    se = np.maximum(np.sqrt(np.maximum(np.nan_to_num(var), 0.0)) / np.sqrt(n), MIN_STANDARD_ERROR)
    half = _quantiles(policy.alpha, rounds) * se
    lo, hi = mean - half, mean + half
    bound = math.log1p(policy.min_effect)
    codes = np.full(d.shape, 3)
    codes[(hi < 0) & (mean <= -bound)] = 1
    codes[(lo > 0) & (mean >= bound)] = 0
    codes[(lo >= -bound) & (hi <= bound)] = 2
    codes[:, : policy.min_rounds - 1] = 3
    done = codes != 3
    stop = np.where(done.any(axis=1), done.argmax(axis=1), rounds - 1)
    return codes[np.arange(trials), stop], stop + 1


def check_sequential(rng: np.random.Generator) -> int:
    """The vectorised rule against `decided` and `judge` themselves, on noisy rows; mismatches."""
    d = rng.normal(rng.choice([0.0, 0.03, 0.05]), 0.04, (200, 60))
    policy = PairedPolicy()
    codes, stops = sequential(d, policy)
    bad = 0
    for row, code, stop in zip(d, codes, stops, strict=True):
        pairs = [(1.0, math.exp(v)) for v in row]
        n = next((k for k in range(policy.min_rounds, len(row) + 1) if decided(pairs[:k], policy)), len(row))
        bad += (
            n != stop
            or judge(pairs[:n], policy).verdict != ("slower", "faster", "same", "inconclusive")[code]
        )
    return bad


def summarise(codes: np.ndarray, stops: np.ndarray, effect: float) -> dict[str, Any]:
    return {
        "effect": effect,
        "compares": int(codes.size),
        "slower": float(np.mean(codes == 0)),
        "faster": float(np.mean(codes == 1)),
        "same": float(np.mean(codes == 2)),
        "inconclusive": float(np.mean(codes == 3)),
        "rounds_median": float(np.median(stops)),
        "rounds_p90": float(np.percentile(stops, 90)),
    }


# ---------------------------------------------------------------- 2. resampled real rounds


def resampled(
    trials: list[dict[str, Any]], compares: int, max_rounds: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Each (model, effect): its real rounds' log ratios drawn with replacement into compares."""
    out = []
    for model in sorted({t["model"] for t in trials}):
        for effect in EFFECTS:
            mine = [t for t in trials if t["model"] == model and t["effect"] == effect]
            logs = np.array([v for t in mine for v in t["log_ratios"]])
            if logs.size < 5:
                continue
            codes, stops = sequential(rng.choice(logs, (compares, max_rounds)), PairedPolicy())
            s_per_round = sum(t["elapsed_s"] for t in mine) / sum(t["rounds"] for t in mine)
            row = {"model": model, **summarise(codes, stops, effect), "rounds_drawn_from": int(logs.size)}
            row["sd_log_ratio"] = float(logs.std(ddof=1))
            row["device_s_median"] = row["rounds_median"] * s_per_round
            row["device_s_p90"] = row["rounds_p90"] * s_per_round
            out.append(row)
    return out


# ---------------------------------------------------------------- 3. recorded noise models


def recorded_noise(path: Path) -> list[np.ndarray]:
    """Per recorded model: the within-night residuals of log session p50 (scaled by sqrt(k/(k-1))
    for the night mean they were taken from) and, as a second row, the night levels' deviations."""
    doc = json.loads(path.read_text())
    noise = []
    for sessions in doc["models"].values():
        nights: dict[int, list[float]] = {}
        for s in sessions:
            nights.setdefault(int(s["night"]), []).append(math.log(float(np.median(s["samples_ms"]))))
        residuals, levels = [], []
        for values in nights.values():
            v = np.array(values)
            residuals += list((v - v.mean()) * math.sqrt(len(v) / (len(v) - 1)))
            levels.append(v.mean())
        noise.append(np.array(residuals))
        noise.append(np.array(levels) - np.mean(levels))
    return noise


def simulate_pairs(
    noise: list[np.ndarray],
    pairs: int,
    rounds: int,
    effect: float,
    policy: PairedPolicy,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """`pairs` compares (pair i on recorded model i mod 6), each its night's shared level plus
    A's and B's within-night residuals; B times (1 + effect)."""
    models = len(noise) // 2
    codes, stops = np.empty(pairs, dtype=int), np.empty(pairs, dtype=int)
    chunk = max(1, 4_000_000 // rounds)
    for start in range(0, pairs, chunk):
        idx = np.arange(start, min(start + chunk, pairs))
        d = np.empty((idx.size, rounds))
        for m in range(models):
            rows = np.flatnonzero(idx % models == m)
            residuals, levels = noise[2 * m], noise[2 * m + 1]
            night = rng.choice(levels, (rows.size, 1))
            a = night + rng.choice(residuals, (rows.size, rounds))
            b = night + rng.choice(residuals, (rows.size, rounds)) + math.log1p(effect)
            d[rows] = b - a
        codes[idx], stops[idx] = sequential(d, policy)
    return codes, stops


def recorded(path: Path, families: int, rounds: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    noise = recorded_noise(path)
    out = []
    for m in FAMILIES:
        policy = PairedPolicy().for_family(m)
        count = max(families // m, 100)
        codes, stops = simulate_pairs(noise, count * m, DEFAULT_MAX_ROUNDS, 0.0, policy, rng)
        alarms = (codes < 2).reshape(count, m).any(axis=1)
        row: dict[str, Any] = {"pairs": m, "alpha_per_pair": policy.alpha, "families": count}
        row["aa_family_false_alarm"] = float(alarms.mean())
        row["aa_pair"] = summarise(codes, stops, 0.0)
        for effect in EFFECTS[1:]:
            codes, stops = simulate_pairs(noise, max(families, 2000), rounds, effect, policy, rng)
            row[f"{effect:.2f}"] = {
                **summarise(codes, stops, effect),
                "decided_within_default_rounds": float(np.mean((stops <= DEFAULT_MAX_ROUNDS) & (codes != 3))),
                "slower_within_default_rounds": float(np.mean((stops <= DEFAULT_MAX_ROUNDS) & (codes == 0))),
            }
        out.append(row)
    return out


# ---------------------------------------------------------------- output


def _share(x: float, n: int) -> str:
    return f"{x * n:.0f}/{n}" if n < 1000 else f"{100 * x:.2f}%"


def real_table(real: dict[str, Any]) -> list[str]:
    lines = [
        "| model | compare | true ratio (bare loop, 95% CI) | compares | slower | faster | same | "
        "inconclusive | rounds median / p90 | device s median / p90 |",
        "|" + "---|" * 10,
    ]
    for model, info in real["models"].items():
        for effect in EFFECTS:
            mine = [t for t in real["trials"] if t["model"] == model and t["effect"] == effect]
            if not mine:
                continue
            true = info["true_ratio"][f"{effect:.2f}"]
            verdicts = [t["verdict"] for t in mine]
            rounds = [t["rounds"] for t in mine]
            secs = [t["elapsed_s"] for t in mine]
            n = len(mine)
            lines.append(
                f"| {model} ({info['p50_ms']:.2f} ms) | {CONDITION[effect]} | {true['ratio']:.3f} "
                f"({true['ci95'][0]:.3f}-{true['ci95'][1]:.3f}) | {n} | "
                + " | ".join(f"{verdicts.count(v)}" for v in ("slower", "faster", "same", "inconclusive"))
                + f" | {np.median(rounds):.0f} / {np.percentile(rounds, 90):.0f} | "
                f"{np.median(secs):.0f} / {np.percentile(secs, 90):.0f} |"
            )
    return lines


def resampled_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| model | compare | rounds drawn from | sd log ratio | compares | slower | faster | same | "
        "rounds median / p90 | device s median / p90 |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        cells = [r["model"], CONDITION[r["effect"]], str(r["rounds_drawn_from"]), f"{r['sd_log_ratio']:.4f}"]
        cells += [str(r["compares"]), f"{100 * r['slower']:.2f}%", f"{100 * r['faster']:.2f}%"]
        cells += [f"{100 * r['same']:.1f}%", f"{r['rounds_median']:.0f} / {r['rounds_p90']:.0f}"]
        cells.append(f"{r['device_s_median']:.0f} / {r['device_s_p90']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def recorded_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| pairs per compare | alpha per pair | A/A: families with a false alarm | "
        "+5%: slower (within 200 rounds) | +5%: rounds median / p90 | "
        "+10%: slower (within 200 rounds) | +10%: rounds median / p90 |",
        "|" + "---|" * 7,
    ]
    for r in rows:
        cells = [
            f"{r['pairs']}",
            f"{r['alpha_per_pair']:g}",
            f"{100 * r['aa_family_false_alarm']:.2f}% of {r['families']}",
        ]
        for effect in EFFECTS[1:]:
            e = r[f"{effect:.2f}"]
            cells.append(f"{100 * e['slower']:.1f}% ({100 * e['slower_within_default_rounds']:.1f}%)")
            cells.append(f"{e['rounds_median']:.0f} / {e['rounds_p90']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="real compares per model and condition")
    parser.add_argument("--models", default="cnn192,tinynet", help="real models: cnn192, tinynet")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=REAL_MAX_ROUNDS,
        help=f"rounds a real compare may run (farm compare: {DEFAULT_MAX_ROUNDS}; part 2 runs to that)",
    )
    parser.add_argument("--blocks", type=int, default=200, help="interleaved blocks of the bare loop")
    parser.add_argument("--resamples", type=int, default=20_000, help="compares drawn from the real rounds")
    parser.add_argument("--families", type=int, default=20_000, help="pairs simulated per recorded row")
    parser.add_argument(
        "--sim-rounds", type=int, default=2_000, help="rounds a simulated +5%/+10% pair may run"
    )
    parser.add_argument("--quick", action="store_true", help="2 trials of cnn192, fewer simulations")
    parser.add_argument("--simulated-only", action="store_true", help="skip the real host runs")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of tables")
    parser.add_argument("--out", type=Path, help="also write the JSON document here")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.models = 2, "cnn192"
        args.resamples, args.families, args.sim_rounds = 2_000, 2_000, 1_000

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    rng = np.random.default_rng(SEED)
    mismatches = check_sequential(rng)
    if mismatches:
        raise SystemExit(
            f"the vectorised rule disagrees with farm.analysis.paired.decided on {mismatches} rows"
        )
    started = time.time()
    doc: dict[str, Any] = {
        "kind": "compare-benchmark",
        "load_before": list(os.getloadavg()),
        "cpus": os.cpu_count(),
    }
    doc["settings"] = {
        "threads": DEFAULT_COMPARE_THREADS,
        "pin": AUTO_AFFINITY,
        "runs": DEFAULT_TIMED_RUNS,
        "warmup": DEFAULT_WARMUP_RUNS,
        "max_rounds": args.max_rounds,
        "budget_s": DEFAULT_BUDGET_S,
        "policy": PairedPolicy().__dict__,
    }
    if not args.simulated_only:
        doc["real"] = real_runs(args.trials, args.models.split(","), args.max_rounds, args.blocks, log)
        doc["resampled"] = resampled(doc["real"]["trials"], args.resamples, DEFAULT_MAX_ROUNDS, rng)
    doc["load_after"] = list(os.getloadavg())
    doc["recorded"] = recorded(RECORDING, args.families, args.sim_rounds, rng)
    doc["elapsed_s"] = time.time() - started
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1))
    if args.json:
        print(json.dumps(doc, indent=1))
        return
    print(
        f"load average (1/5/15 min) before {doc['load_before']}, after the real runs {doc['load_after']}; "
        f"{doc['cpus']} CPUs; {doc['elapsed_s']:.0f} s"
    )
    if "real" in doc:
        print(
            f"\n1. Real host runs (measured): threads 1, pinned to CPU {doc['real']['pinned_cpus']}, "
            f"{DEFAULT_TIMED_RUNS} runs after {DEFAULT_WARMUP_RUNS} warm-up per session, PairedPolicy()"
        )
        print("\n".join(real_table(doc["real"])))
        print("\n2. The real rounds resampled into more compares (measured noise, synthetic compares)")
        print("\n".join(resampled_table(doc["resampled"])))
    print(f"\n3. Recorded noise ({RECORDING.name}: default threads, not pinned; synthetic compares)")
    print("\n".join(recorded_table(doc["recorded"])))


if __name__ == "__main__":
    main()
