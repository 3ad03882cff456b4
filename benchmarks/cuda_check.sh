#!/usr/bin/env bash
# The GPU check: host-cpu against host-cuda on a model with an op the CUDA provider lacks and on
# examples/tinynet.onnx, with the fallbacks, copies and numeric drift that ONNX Runtime shows.
#
#   benchmarks/cuda_check.sh DIR
#
# Writes to DIR (8 files at most, so the whole folder can come back from a leased machine):
#   summary.txt                 what was run, CUDA availability, one line per job, tests/cuda's result
#   results.json                every job: latency, load, first inference, numeric diff, per-op
#                               placement, transfers (copy share, fallbacks, partitions), notes
#   submit.jsonl                `farm submit --devices host-cpu,host-cuda --json`, one line per model
#                               (only where Ray is installed; otherwise a line saying so)
#   nvidia-smi.txt              the GPU, then device memory and utilisation sampled every 200 ms
#   <model>-cuda-profile.json   ORT's raw profile of a CUDA session (10 runs)
#   <model>-cuda-session.log    ORT's verbose log of creating that session (placements, copies)
#
# Nothing here reaches outside the machine. onnxruntime-gpu must already be importable, or be
# given as wheels: FARM_WHEELHOUSE=/path/to/wheels (installed with pip --no-index into a venv
# that sees the system's packages). Other settings: FARM_PYTHON (the interpreter to use),
# FARM_CUDA_RUNS (timed runs per job, default 50). Sized to finish in well under 5 minutes.
set -euo pipefail

DIR=${1:?usage: benchmarks/cuda_check.sh DIR}
cd "$(dirname "$0")/.."
REPO=$(pwd)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/farm-cuda-check.XXXXXX")
RUNS=${FARM_CUDA_RUNS:-50}
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
SUMMARY="$DIR/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

SAMPLER=""
cleanup() {
  if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

say "farm cuda check, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# 1. The GPU as the driver sees it, then memory and utilisation sampled while the jobs run
if command -v nvidia-smi >/dev/null; then
  { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; } \
    >"$DIR/nvidia-smi.txt" 2>&1 || true
  echo "# sampled during the jobs: onnxruntime's Python API exposes no device memory" >>"$DIR/nvidia-smi.txt"
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 200 \
    >>"$DIR/nvidia-smi.txt" 2>&1 &
  SAMPLER=$!
else
  echo "nvidia-smi: not found" >"$DIR/nvidia-smi.txt"
fi

# 2. A Python whose onnxruntime has the CUDA provider
PY=${FARM_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
has_cuda_ep() {
  "$1" -c 'import sys, onnxruntime as o; sys.exit("CUDAExecutionProvider" not in o.get_available_providers())' \
    2>/dev/null
}
if ! has_cuda_ep "$PY" && [ -n "${FARM_WHEELHOUSE:-}" ]; then
  say "installing onnxruntime-gpu from $FARM_WHEELHOUSE into a venv (system packages visible)"
  "$PY" -m venv --system-site-packages "$SCRATCH/venv"
  "$SCRATCH/venv/bin/python" -m pip install -q --no-index --find-links "$FARM_WHEELHOUSE" onnxruntime-gpu \
    2>&1 | tee -a "$SUMMARY"
  PY="$SCRATCH/venv/bin/python"
fi
say "python: $PY ($("$PY" -c 'import sys, onnxruntime as o; print(sys.version.split()[0], "onnxruntime", o.__version__, o.get_available_providers())' 2>&1))"
say "availability: $("$PY" -c 'from ondevice_farm_agents.host.cuda import cuda_availability; print(cuda_availability())' 2>&1)"

# 3. The jobs, through the host agent (the same code `farm submit` runs on each unit)
status=0
timeout 180 "$PY" benchmarks/cuda_check_run.py "$DIR" examples/tinynet.onnx \
  --build-celu "$SCRATCH/celu_fallback.onnx" --runs "$RUNS" 2>&1 | tee -a "$SUMMARY" || status=$?

# 4. The same through `farm submit`, where Ray is installed. Ray binds the machine's external
#    address unless it runs in a network namespace with only loopback up: use one where we can.
loopback_only() {
  if command -v unshare >/dev/null && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
    unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
if "$PY" -c 'import ray' 2>/dev/null; then
  : >"$DIR/submit.jsonl"
  for model in "$SCRATCH/celu_fallback.onnx" examples/tinynet.onnx; do
    rc=0
    loopback_only timeout 120 "$PY" -c 'from ondevice_farm.cli.main import main; main()' --home "$SCRATCH/home" \
      submit "$model" --devices host-cpu,host-cuda --runs "$RUNS" --json \
      >>"$DIR/submit.jsonl" 2>>"$SCRATCH/submit.err" || rc=$?
    if [ "$rc" = 0 ]; then
      say "farm submit $(basename "$model"): ok"
    else
      say "farm submit $(basename "$model"): exit $rc ($(tail -1 "$SCRATCH/submit.err"))"
    fi
  done
else
  echo '{"skipped": "ray is not installed in this Python: farm submit needs it; results.json holds the jobs"}' \
    >"$DIR/submit.jsonl"
  say "farm submit: skipped (no ray here); the jobs above ran through the same host agent"
fi

# 5. The GPU tests of tests/cuda (they skip themselves where no GPU is usable)
say "tests/cuda: $(timeout 120 "$PY" -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tail -1)"
say "done in ${SECONDS}s, status $status"
exit "$status"
