"""Record real host-cpu measurement sessions: the noise `benchmarks/regression.py` replays.

    python benchmarks/record_sessions.py [--nights 6] [--repeats 5] [--runs 30] [--out FILE]

Five real models (the three in ../shared/models where present, examples/tinynet.onnx, and the two
of benchmarks/aa_models.py), "nights" back to back, each night every model measured in `repeats`
sessions, each session a fresh process running agents/ondevice_farm_agents/host/session.py exactly as a host
job's repeat does (load, first inference, warm-up, timed runs). Writes every session's samples with
the night, the repeat and the wall-clock time it started, so the recording is the evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.aa_models import build
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = ROOT.parent / "shared" / "models"  # ../shared/models beside the checkout
SESSION = ROOT / "agents" / "ondevice_farm_agents" / "host" / "session.py"
THREADS: int | None = None  # set by --threads


def models(tmp: Path) -> list[Path]:
    shared = [SHARED_MODELS / n for n in ("mobilenet_v2.onnx", "small_encoder.onnx", "tts_decoder.onnx")]
    return [p for p in shared if p.exists()] + [ROOT / "examples" / "tinynet.onnx", *build(tmp)]


def session(model: Path, inputs: Path, warmup: int, runs: int) -> list[float]:
    spec = {
        "model": str(model),
        "providers": ["CPUExecutionProvider"],
        "inputs": str(inputs),
        "warmup": warmup,
        "runs": runs,
        "threads": THREADS,
    }
    done = subprocess.run(
        [sys.executable, str(SESSION)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return [float(v) for v in json.loads(done.stdout)["samples_ms"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: ORT's)")
    parser.add_argument("--machine", default="2 cores shared with other work", help="how busy the host was")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "fixtures" / "host_sessions.json")
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    with tempfile.TemporaryDirectory(prefix="farm-aa-") as tmp_dir:
        tmp = Path(tmp_dir)
        paths = models(tmp)
        inputs: dict[str, Path] = {}
        for path in paths:
            info = inspect_model(path)
            npz = tmp / f"{path.stem}.npz"
            np.savez(npz, **seeded_inputs(info, resolve_shapes(info, {}), 0))
            inputs[path.stem] = npz
        record: dict[str, list[dict[str, object]]] = {p.stem: [] for p in paths}
        started = time.time()
        load_before = os.getloadavg()[0]
        for night in range(args.nights):
            for path in paths:
                for repeat in range(args.repeats):
                    at = time.time() - started
                    samples = session(path, inputs[path.stem], args.warmup, args.runs)
                    record[path.stem].append(
                        {"night": night, "repeat": repeat, "at_s": round(at, 3), "samples_ms": samples}
                    )
            print(f"night {night + 1}/{args.nights} done at {time.time() - started:.0f} s", flush=True)
    # the load average says whether other work shared the cores: the noise depends on it
    load = f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    threads = "default threads" if args.threads is None else f"{args.threads} intra-op thread(s)"
    document = {
        "provenance": f"measured: host-cpu on the development machine ({args.machine}; {load}), "
        f"onnxruntime CPU EP, "
        f"{threads}; {args.nights} nights x {args.repeats} fresh-process "
        f"sessions x {args.runs} timed runs after {args.warmup} warm-up; "
        f"recorded {time.strftime('%Y-%m-%d')}",
        "runs": args.runs,
        "warmup": args.warmup,
        "models": record,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
