"""Does a farm generation job measure what a bare loop over onnxruntime-genai measures?

For each model, rounds of:
  bare: a fresh Python process with numpy and onnxruntime_genai only, the calls
        onnxruntime-genai's benchmark/python/benchmark_e2e.py times: `og.Model`, then per
        generation `Generator.append_tokens(prompt)` (prompt processing) and each
        `generate_next_token()`; one untimed generation first, then REPS timed ones
  farm: `ondevice_farm.controller.pipeline.submit` with `--generate prompt=P,decode=D,reps=R` on
        host-cpu inside the embedded Ray a `farm submit` starts (fleet, DeviceActor, store, the
        host reference), whose runner is a fresh process too
        (agents/ondevice_farm_agents/host/generate_session.py)
in an order that alternates round by round, so the machine's other load cancels in the ratio.
Prints per model the median over rounds of farm/bare for TTFT (median over the round's
generations) and for decode tokens/s (the tokens after the first over their span), every round's
ratios, and the 1-minute load average at the row's start and end (goal: within +/-5 %).

    python benchmarks/genai_fidelity.py [--rounds N] [--prompt P] [--decode D] [--reps R] [DIR ...]

Default models: two random Llamas built here offline with onnxruntime-genai's builder (the
tests' tiny one, hidden 64 x 2 layers, and a bigger one, hidden 256 x 4 layers) into
benchmarks/results/genai-models/. Needs onnxruntime-genai, transformers, tokenizers, onnx-ir, torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / "benchmarks" / "results" / "genai-models"
ROUNDS = 5
PROMPT, DECODE, REPS = 64, 32, 5
SEED = 0


def bare_loop(spec: dict[str, Any]) -> dict[str, list[float]]:
    """TTFT ms and decode tokens/s of each timed generation (run in a fresh process)."""
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(spec["model"])
    prompt = np.asarray(spec["prompt_ids"], dtype=np.int32)
    decode = int(spec["decode"])
    length = len(prompt) + decode
    ttft, rates = [], []
    for rep in range(int(spec["reps"]) + 1):  # the first generation is never timed
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=length, min_length=length, batch_size=1)
        generator = og.Generator(model, params)
        start = time.perf_counter_ns()
        generator.append_tokens(prompt)
        generator.generate_next_token()
        first = time.perf_counter_ns()
        for _ in range(decode - 1):
            generator.generate_next_token()
        last = time.perf_counter_ns()
        if rep:
            ttft.append((first - start) / 1e6)
            rates.append((decode - 1) / ((last - first) / 1e9))
    return {"ttft_ms": ttft, "decode_tokens_per_s": rates}


def bare(model: Path, prompt_ids: tuple[int, ...], decode: int, reps: int) -> tuple[float, float]:
    spec = {"model": str(model), "prompt_ids": list(prompt_ids), "decode": decode, "reps": reps}
    done = subprocess.run(
        [sys.executable, __file__, "--bare"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    return statistics.median(result["ttft_ms"]), statistics.median(result["decode_tokens_per_s"])


def default_models() -> list[Path]:
    sys.path.insert(0, str(REPO))
    from tests.generate.tiny_llama import build_tiny_llama

    return [
        build_tiny_llama(MODELS_DIR / "llama-h64-l2"),
        build_tiny_llama(MODELS_DIR / "llama-h256-l4", hidden_size=256, layers=4),
    ]


def main(models: list[Path], rounds: int, prompt: int, decode: int, reps: int) -> None:
    from ondevice_farm.config import FarmHome
    from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
    from ondevice_farm.controller.pipeline import submit
    from ondevice_farm.controller.submission import prepare
    from ondevice_farm.controller.submit_request import SubmitRequest
    from ondevice_farm.generate.spec import GenerateSpec
    from ondevice_farm.profiles import load_profiles
    from ondevice_farm_agents.base import AgentSettings

    profiles = load_profiles()
    spec = GenerateSpec(prompt_tokens=prompt, decode_tokens=decode, reps=reps)
    print(
        f"{'model':<16} {'bare TTFT ms':>12} {'farm TTFT ms':>12} {'ratio':>6} {'bare dec t/s':>12} "
        f"{'farm dec t/s':>12} {'ratio':>6}  {'TTFT rounds':<30} {'decode rounds':<30} {'load':>10}"
    )
    with ray_cluster(ClusterConfig()), tempfile.TemporaryDirectory() as tmp:
        home = FarmHome(Path(tmp))
        for model in models:
            request = SubmitRequest(model_path=model, devices="host-cpu", seed=SEED, generate=spec)
            plan = prepare(request, profiles).generation
            assert plan is not None
            load_start = os.getloadavg()[0]
            rows: list[tuple[float, float, float, float]] = []
            for round_index in range(rounds):
                farm_first = round_index % 2 == 1
                if not farm_first:
                    bare_ttft, bare_rate = bare(model, plan.prompt_ids, decode, reps)
                document = submit(
                    request, home=home, profiles=profiles, settings=AgentSettings(profiles=profiles),
                    cluster=ClusterConfig(),
                )  # fmt: skip
                if farm_first:
                    bare_ttft, bare_rate = bare(model, plan.prompt_ids, decode, reps)
                job = document["jobs"][0]
                if "generation" not in job:
                    raise SystemExit(f"the farm's job on {model} failed: {job.get('error', job)}")
                gen = job["generation"]
                rows.append(
                    (bare_ttft, gen["ttft_ms"]["median"], bare_rate, gen["decode_tokens_per_s"]["median"])
                )
            ttft_ratios = [f / b for b, f, _, _ in rows]
            rate_ratios = [f / b for _, _, b, f in rows]
            medians = [statistics.median(r[i] for r in rows) for i in range(4)]
            name = model.parent.name if model.name == "genai" else model.name
            shown = [",".join(f"{r:.2f}" for r in ratios) for ratios in (ttft_ratios, rate_ratios)]
            print(
                f"{name:<16} {medians[0]:>12.3f} {medians[1]:>12.3f} {statistics.median(ttft_ratios):>6.3f} "
                f"{medians[2]:>12.1f} {medians[3]:>12.1f} {statistics.median(rate_ratios):>6.3f}  "
                f"{shown[0]:<30} {shown[1]:<30} {load_start:>4.2f}-{os.getloadavg()[0]:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare"]:
        sys.stdout.write(json.dumps(bare_loop(json.loads(sys.stdin.read()))))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="ONNX Runtime GenAI folders")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--prompt", type=int, default=PROMPT)
    parser.add_argument("--decode", type=int, default=DECODE)
    parser.add_argument("--reps", type=int, default=REPS)
    args = parser.parse_args()
    main(args.models or default_models(), args.rounds, args.prompt, args.decode, args.reps)
