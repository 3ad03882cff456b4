"""`farm compare BASE_DIR CANDIDATE_DIR --generate ...`: two folders interleaved in rounds on the host,
judged on TTFT and decode tokens/s (docs/compare.md, "Generation"), for real: fresh session processes
of onnxruntime-genai, a bigger Llama as the slower B."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

from ondevice_farm.analysis.paired import PairedPolicy, decided
from ondevice_farm.analysis.paired_generation import (
    DECODE_RATE,
    GENERATION_METRICS,
    TTFT,
    generation_family,
    judge_generation,
    paired_rounds_document,
)
from ondevice_farm.generate.folder import read_folder
from ondevice_farm.generate.prompt import generation_plan
from ondevice_farm.generate.spec import parse_generate
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, PairedPlan, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.paired import run_paired_rounds

from .test_generate_host import SCHEMA, farm

#: `same` is asked within +/-10%: the compare's default (3%) needs 20 or more rounds on a shared 2-core
#: host (docs/compare.md, "Generation"), more than this test's time allows when the host is busy;
#: B in the A/B test is several times slower, far outside it
AA_MIN_EFFECT = 0.10
SPEC = "prompt=64,decode=32,reps=7"


def _request(folder: Path, plan_of: Path) -> RunRequest:
    plan = generation_plan(parse_generate(SPEC), read_folder(plan_of), seed=0)
    return RunRequest(
        artifact=folder,
        artifact_sha256="",
        target=Target.parse("ort/cpu"),
        inputs={},
        intra_op_threads=1,
        profile_ops=False,
        generation=plan,
    )


def test_a_folder_against_itself_is_never_slower_on_either_metric(tiny_llama: Path) -> None:
    """The rounds as a compare's unit runs them (fresh sessions, random order), judged as the
    compare judges them: neither metric says slower or faster, each interval holds 1, and where the
    rounds decide within the budget the verdict is `same` (+/-AA_MIN_EFFECT). On a quiet host they
    decide in about 20 rounds; beside a second busy test worker the budget can run out first
    (`inconclusive`), which is the honest answer there, not a false alarm."""
    policy = generation_family(PairedPolicy(min_effect=AA_MIN_EFFECT), pairs=1)
    agent = HostAgent(AgentSettings(profiles=load_profiles()))
    unit = agent.discover()[0]
    request = _request(tiny_llama, tiny_llama)
    plan = PairedPlan(
        baseline=request,
        max_rounds=40,
        budget_s=25.0,
        seed=11,
        decided=functools.partial(decided, policy=policy),
        min_rounds=policy.min_rounds,
    )
    trace = run_paired_rounds(agent, unit, request, plan)
    stored = paired_rounds_document(trace)["rounds"]
    verdicts = judge_generation(stored, policy)
    summary = {
        m: (v.paired.verdict, v.paired.ci_low, v.paired.ci_high, v.paired.rounds) for m, v in verdicts.items()
    }
    assert not any(v.paired.verdict in ("slower", "faster") for v in verdicts.values()), summary
    assert all(v.paired.ci_low <= 1.0 <= v.paired.ci_high for v in verdicts.values()), summary
    if trace.stopped == "decided":
        assert all(v.paired.verdict == "same" for v in verdicts.values()), summary
    # each round measured both sides' figures in fresh sessions, in the order it drew
    assert {r["order"] for r in stored} <= {"AB", "BA"}
    assert all(r["baseline_ttft_ms"] > 0 and r["candidate_decode_tokens_per_s"] > 0 for r in stored)
    assert policy.alpha == PairedPolicy().alpha / len(GENERATION_METRICS)  # Bonferroni over the two


def test_a_bigger_folder_is_slower_on_both_metrics_and_exits_1(
    tmp_path: Path, tiny_llama: Path, slower_llama: Path
) -> None:
    """The real entry point: B has twice A's width and layers, so both its TTFT and its decode rate
    are slower in every round, decided within the first looks."""
    html, markdown = tmp_path / "c.html", tmp_path / "c.md"
    done = farm(
        tmp_path / "home", "compare", str(tiny_llama), str(slower_llama), "-d", "host-cpu",
        "--generate", "prompt=64,decode=32,reps=3", "--max-rounds", "12", "--order-seed", "4",
        "--json", "--html", str(html), "--markdown", str(markdown),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    document = json.loads(done.stdout)
    [pair] = document["comparisons"]
    assert pair["verdict"] == "slower" and pair["stopped"] == "decided" and 5 <= pair["rounds"] <= 12
    ttft, decode = pair["metrics"][TTFT], pair["metrics"][DECODE_RATE]
    for metric in (ttft, decode):
        assert metric["verdict"] == "slower" and metric["interval"][0] > 1.0 and metric["ratio"] > 1.5
    assert ttft["candidate"] > ttft["baseline"]  # ms: B's TTFT is longer
    assert decode["candidate"] < decode["baseline"]  # tokens/s: B's decode is slower
    assert "MLPerf Client" in decode["definition"] and decode["ratio_definition"].startswith("A/B")
    assert document["settings"]["alpha_per_pair"] == document["settings"]["alpha"] / 2  # two metrics
    assert document["settings"]["generate"].startswith("prompt=64,decode=32")
    for r in pair["round_details"]:
        assert r["candidate_ttft_ms"] > r["baseline_ttft_ms"]
        assert r["candidate_decode_tokens_per_s"] < r["baseline_decode_tokens_per_s"]
    page = html.read_text()
    assert page.count("<svg") == 2 and "decode t/s" in page and "slower" in page
    assert "| host-cpu | TTFT |" in markdown.read_text() and "**slower**" in markdown.read_text()
    # the rounds as a nightly job stores them validate against the run schema
    paired = {"seed": 4, "stopped": pair["stopped"], "rounds": pair["round_details"]}
    jsonschema.validate(paired, {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/ok_job/properties/paired"})
