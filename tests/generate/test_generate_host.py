"""`farm submit DIR --generate ...` on the host, for real: a tiny Llama built by onnxruntime-genai's
builder, generated from in a fresh process, every figure of docs/generate.md in the document and
the tokens against the host's greedy reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from .summaries import assert_percentiles, assert_summarises
from .tiny_llama import CONTEXT_LENGTH, HEADS, HIDDEN_SIZE, KV_HEADS, LAYERS

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
PROMPT, DECODE, REPS = 64, 32, 3


def farm(home: Path, *args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """The real entry point in a child process (embedded Ray, the store, the report)."""
    return subprocess.run(
        [sys.executable, "-m", "ondevice_farm", "--home", str(home), *args],
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip


def _submit(home: Path, folder: Path, spec: str, *more: str) -> dict[str, Any]:
    done = farm(home, "submit", str(folder), "--devices", "host-cpu", "--generate", spec, *more, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(document, SCHEMA)
    return document


def test_generation_job_reports_every_metric(tmp_path: Path, tiny_llama: Path) -> None:
    document = _submit(tmp_path / "home", tiny_llama, f"prompt={PROMPT},decode={DECODE},reps={REPS}")
    (job,) = document["jobs"]
    assert (job["device"], job["target"], job["status"]) == ("host-cpu", "ort/cpu", "ok")
    assert document["settings"]["generate"] == f"prompt={PROMPT},decode={DECODE},depth=0,reps={REPS},warmup=1"
    assert document["model"]["inputs"] == [{"name": "prompt_ids", "shape": [PROMPT], "dtype": "int32"}]
    gen = job["generation"]
    assert gen["source"] == "measured" and gen["runtime"].startswith("onnxruntime-genai ")
    assert (gen["prompt_tokens"], gen["decode_tokens"]) == (PROMPT, DECODE)
    # load, cold and warm; TTFT, prefill and decode rates over REPS timed generations
    assert job["load_ms"] > 0 and job["warm_load_ms"] > 0
    for figure in ("ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"):
        assert_summarises(gen[figure], REPS)
    # TTFT holds the prefill: its rate and TTFT agree on the prompt's length
    assert gen["ttft_ms"]["median"] >= PROMPT / gen["prefill_tokens_per_s"]["max"] * 1000 * 0.999
    tokens = gen["token_latency_ms"]
    assert_percentiles(tokens, REPS * (DECODE - 1))  # the tokens after the first
    assert job["latency_ms"]["samples"] and len(job["latency_ms"]["samples"]) == REPS * (DECODE - 1)
    # decode rate is the tokens after the first over their span: at most 1 / mean token latency
    assert gen["decode_tokens_per_s"]["median"] <= 1000 / min(tokens["samples"]) * 1.001
    assert job["peak_memory_mb"] > 0 and job["peak_memory_kind"] == "rss_delta"
    kv = gen["kv_cache"]
    head_size = HIDDEN_SIZE // HEADS
    # K and V per layer, fp32, for every position the last forward pass cached
    assert kv["source"] == "measured", kv
    assert kv["bytes"] == 2 * LAYERS * KV_HEADS * head_size * kv["context_tokens"] * 4
    assert PROMPT + DECODE - 1 <= kv["context_tokens"] <= CONTEXT_LENGTH
    # numerics: greedy on the same host from the same prompt, so every token agrees
    agreement = gen["agreement"]
    assert agreement["share"] == 1.0 and agreement["first_divergence"] is None
    assert agreement["tokens"] == DECODE and agreement["reference_tokens"] == agreement["device_tokens"]
    assert gen["first_step_logits_snr_db"] > 80
    assert job["reference"]["status"] == "passed"
    assert set(job["reference"]["outputs"]) == {"tokens", "first_step_logits"}
    assert job["reference"]["outputs"]["tokens"]["exact_match"] == 1.0


def test_terminal_report_and_depth_sweep(tmp_path: Path, tiny_llama: Path) -> None:
    home = tmp_path / "home"
    done = farm(home, "submit", str(tiny_llama), "--generate", "prompt=16,decode=8,depth=0,128,reps=2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TTFT" in done.stdout and "decode t/s" in done.stdout and "tokens agree" in done.stdout
    assert "depth curve" in done.stdout and "depth    128" in done.stdout
    assert "100% (8/8)" in done.stdout
    assert "TTFT" in done.stderr and "tokens/s" in done.stderr  # the progress line
    shown = json.loads(farm(home, "show", "latest", "--json").stdout)
    gen = shown["jobs"][0]["generation"]
    assert [d["depth"] for d in gen["depths"]] == [0, 128]
    assert all(len(d["ttft_ms"]["samples"]) == 2 for d in gen["depths"])
    assert gen["depths"][1]["depth_prefill_ms"]["median"] > 0
    # the deepest context: 128 + 16 + 8 tokens, less the last token, which no pass cached
    assert gen["kv_cache"]["context_tokens"] >= 128 + 16 + 8 - 1
    report = tmp_path / "r.html"
    assert farm(home, "report", "latest", "--html", str(report)).returncode == 0
    html = report.read_text()
    assert 'id="generation"' in html and "decode latency per token" in html and "depth curve" in html


def test_prompt_file_of_token_ids_and_repeats(tmp_path: Path, tiny_llama: Path) -> None:
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps([5, 17, 42, 99, 120, 7, 64, 33]))
    document = _submit(
        tmp_path / "home", tiny_llama, "decode=4,reps=1", "--prompt-file", str(prompt), "--repeats", "2"
    )
    (job,) = document["jobs"]
    assert job["generation"]["prompt_tokens"] == 8
    assert job["generation"]["agreement"]["share"] == 1.0
    # the second session is a fresh process of its own: its per-token latencies join latency_ms
    assert job["latency_ms"]["spread"]["sessions"] == 2
    assert [len(r["samples"]) for r in job["latency_ms"]["repeats"]] == [3, 3]


def test_bad_input_fails_in_one_line_and_stores_nothing(tmp_path: Path, tiny_llama: Path) -> None:
    home = tmp_path / "home"
    cases = [
        (["--generate", f"prompt={CONTEXT_LENGTH},decode=32"], 2, "over the model's context length"),
        (["--generate", "prompt=8,decode=1"], 2, "decode must be at least 2"),
        (["--generate", "prompt=8,tokens=3"], 2, "unknown key 'tokens'"),
        (["--generate", "prompt=8", "--targets", "ort/xnnpack"], 2, "no selected device supports"),
        ([], 2, "runs as a generation job"),  # a folder without --generate: said, not "not ONNX"
        (["--generate", "prompt=8", "--devices", "iphone15"], 2, "ios is out of scope for them"),
    ]
    for args, code, message in cases:
        done = farm(home, "submit", str(tiny_llama), *args)
        assert done.returncode == code, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    not_a_folder = tmp_path / "plain"
    not_a_folder.mkdir()
    done = farm(home, "submit", str(not_a_folder), "--generate", "prompt=8,decode=4")
    assert done.returncode == 3 and "not an ONNX Runtime GenAI folder" in done.stderr
    prompt = tmp_path / "p.txt"
    prompt.write_text("hello")
    done = farm(home, "submit", str(tiny_llama), "--prompt-file", str(prompt))
    assert done.returncode == 2 and "add --generate" in done.stderr
    runs = farm(home, "runs", "--json")
    assert runs.returncode != 0 or json.loads(runs.stdout)["runs"] == []
