"""ONNX's backend node cases (generated from the installed `onnx`, no files committed) run through the
CoreML lowering and the host MIL executor at fp32, each classified as correct, wrong, refused or crashed.

Only cases whose every node is an op a phone model plausibly holds count (`MOBILE_OPS`: no strings,
sequences, optionals, training, random, signal or control-flow ops). The set is fixed here, not read
from the lowering table, so a new lowering moves cases from refused to correct and never changes
the total. Two feeding modes:

    generated     as ONNX generates the case: weights, pads and scales are graph inputs
    initializers  every input but the first made an initializer, as exported models carry weights

CI runs `ci_sample` (every op combination, ~40% of the cases); `python -m tests.coreml.node_suite`
runs them all (a few minutes on 2 cores), `--json FILE` keeps every outcome.
"""

from __future__ import annotations

import re
import tempfile
import traceback
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ondevice_farm.errors import FarmError
from ondevice_farm.runtimes.coreml.compile import predict_drift

MODES = ("generated", "initializers")
OUTCOMES = ("correct", "wrong", "refused", "crashed")

#: what the expected outputs must be met within (ONNX's own backend test uses the same)
RTOL, ATOL = 1e-3, 1e-4

#: op types of phone models: those the lowering took when the suite was set up, and those it refused
MOBILE_OPS = frozenset(
    """
    Abs Acos Add And ArgMax ArgMin Asin Atan Atanh AveragePool BatchNormalization Cast Ceil Clip
    Concat Constant ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DepthToSpace DequantizeLinear
    Div Dropout Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements Gelu Gemm
    GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual GroupNormalization HardSigmoid HardSwish
    Identity InstanceNormalization LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax
    MatMul Max MaxPool Min Mish Mod Mul Neg Not Or PRelu Pad Pow QuantizeLinear Range Reciprocal
    ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd
    ReduceSum ReduceSumSquare Relu Reshape Resize ScatterND Selu Shape Sigmoid Sign Sin Sinh Slice
    Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile
    TopK Transpose Unsqueeze Where
    Attention RMSNormalization RotaryEmbedding Trilu QLinearMatMul QLinearConv Xor ScatterElements
    Einsum LSTM GRU RNN Round DynamicQuantizeLinear GatherND Mean LRN
    """.split()  # noqa: SIM905  a block of names reads better than 120 quoted strings
)


@dataclass(frozen=True)
class Outcome:
    case: str
    mode: str
    #: one of OUTCOMES
    kind: str
    #: the op types of the case's nodes, and what went wrong (empty when correct)
    ops: tuple[str, ...]
    detail: str = ""
    #: a correct case run again at fp16: its SNR against the expected outputs (dB, inf if exact),
    #: None where not run or the outputs hold no float
    fp16_snr_db: float | None = None


def mobile_cases() -> list[Any]:
    """The node cases whose every node is a mobile op and whose I/O are plain tensors, by name."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        cases = collect_testcases(None)
    mobile = (case for case in cases if case.model is not None and _is_mobile(case.model))
    return sorted(mobile, key=lambda case: str(case.name))


def ci_sample(cases: list[Any], every: int = 3) -> list[Any]:
    """The cases CI runs: the first of each combination of op types (so every lowering is exercised)
    and every `every`-th case besides; about 40% of the suite, in the suite's time budget."""
    seen: set[tuple[str, ...]] = set()
    picked = []
    for index, case in enumerate(cases):
        ops = case_ops(case)
        if ops not in seen or index % every == 0:
            picked.append(case)
        seen.add(ops)
    return picked


def _is_mobile(model: onnx.ModelProto) -> bool:
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in MOBILE_OPS:
            return False
    for vi in [*model.graph.input, *model.graph.output]:
        if vi.type.WhichOneof("value") != "tensor_type":
            return False
        if vi.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            return False
    return True


def case_ops(case: Any) -> tuple[str, ...]:
    return tuple(sorted({node.op_type for node in case.model.graph.node}))


def _as_array(value: Any) -> np.ndarray:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def prepare(case: Any, mode: str, folder: Path) -> tuple[Path, dict[str, np.ndarray], list[np.ndarray]]:
    """The case's model as `mode` feeds it, saved under `folder`, its feeds and expected outputs."""
    inputs, outputs = case.data_sets[0]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    feeds = {vi.name: _as_array(v) for vi, v in zip(model.graph.input, inputs, strict=False)}
    if mode == "initializers":
        constant = [vi.name for vi in model.graph.input[1:] if vi.name in feeds]
        for name in constant:
            model.graph.initializer.append(onnx.numpy_helper.from_array(feeds.pop(name), name))
        if model.ir_version >= 4:  # before IR 4 an initializer must also be listed as an input
            kept = [vi for vi in model.graph.input if vi.name not in constant]
            del model.graph.input[:]
            model.graph.input.extend(kept)
    path = folder / f"{case.name}.{mode}.onnx"
    onnx.save(model, str(path))
    return path, feeds, [_as_array(v) for v in outputs]


def matches(actual: np.ndarray, expected: np.ndarray) -> str:
    """Empty if `actual` meets `expected` (equal infinities and NaNs agree), else what differs."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != expected {expected.shape}"
    if expected.dtype == bool or actual.dtype == bool:
        same = np.array_equal(actual.astype(bool), expected.astype(bool))
        return "" if same else "booleans differ"
    act, ref = actual.astype(np.float64), expected.astype(np.float64)
    if np.allclose(act, ref, rtol=RTOL, atol=ATOL, equal_nan=True):
        return ""
    worst = float(np.nanmax(np.abs(act - ref))) if act.size else 0.0
    return f"max abs error {worst:.3g}"


def snr_db(actual: list[np.ndarray], expected: list[np.ndarray]) -> float | None:
    """Signal-to-noise of the float outputs against the expected ones, in dB (inf if exact)."""
    floats = [(a, e) for a, e in zip(actual, expected, strict=True) if e.dtype.kind == "f"]
    pairs = [(np.asarray(a, np.float64), e.astype(np.float64)) for a, e in floats if np.shape(a) == e.shape]
    pairs = [(a, e) for a, e in pairs if np.all(np.isfinite(e))]
    if not pairs:
        return None
    signal = sum(float(np.sum(e * e)) for _, e in pairs)
    noise = sum(float(np.sum((a - e) ** 2)) for a, e in pairs)
    if noise == 0.0:
        return float("inf")
    return float(10 * np.log10(max(signal, 1e-30) / noise))


def run_case(case: Any, mode: str, *, fp16: bool = False) -> Outcome:
    """One case in one feeding mode through lowering and the host executor at fp32; a correct one
    again at fp16 where `fp16` (its SNR: the drift CoreML's default precision predicts)."""
    ops = case_ops(case)
    with tempfile.TemporaryDirectory(prefix="farm-node-") as folder:
        path, feeds, expected = prepare(case, mode, Path(folder))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = list(predict_drift(path, feeds, precision="fp32").values())
                half = _fp16_outputs(path, feeds) if fp16 else None
        except FarmError as exc:
            return Outcome(case.name, mode, "refused", ops, str(exc).splitlines()[-1].strip())
        except Exception as exc:  # what the test exists to catch: a traceback instead of a refusal
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return Outcome(case.name, mode, "crashed", ops, f"{exc!r} at {where.filename}:{where.lineno}")
    if len(got) != len(expected):
        return Outcome(case.name, mode, "wrong", ops, f"{len(got)} outputs, expected {len(expected)}")
    for index, (actual, reference) in enumerate(zip(got, expected, strict=True)):
        differs = matches(np.asarray(actual), reference)
        if differs:
            return Outcome(case.name, mode, "wrong", ops, f"output {index}: {differs}")
    snr = snr_db(half, expected) if half is not None and len(half) == len(expected) else None
    return Outcome(case.name, mode, "correct", ops, fp16_snr_db=snr)


def tally(outcomes: Iterable[Outcome]) -> dict[str, Counter[str]]:
    """mode -> outcome kind -> count."""
    counts: dict[str, Counter[str]] = {mode: Counter() for mode in MODES}
    for outcome in outcomes:
        counts[outcome.mode][outcome.kind] += 1
    return counts


def _fp16_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """The case at fp16, or None where fp16 cannot run it (an fp32 result stands on its own)."""
    try:
        return list(predict_drift(path, feeds, precision="fp16").values())
    except Exception:  # an fp16-only failure is not this suite's verdict, only a missing SNR
        return None


def run_suite(cases: list[Any], jobs: int = 2, *, fp16: bool = False) -> list[Outcome]:
    """Every case in both modes, over `jobs` forked workers (correct ones again at fp16 if `fp16`).

    A case with one input is the same model in both modes: it runs once and counts in both.
    """
    import gc
    import logging
    import multiprocessing

    import coremltools  # noqa: F401  imported before the freeze, so its objects are frozen too

    logging.disable(logging.WARNING)  # coremltools logs every bool I/O it casts
    _CASES.clear()
    _CASES.extend(cases)
    _FP16[:] = [fp16]
    # ct.convert runs gc.collect() on every call; over the thousand generated cases held here that
    # is most of the run. Frozen objects are skipped by the collector.
    gc.collect()
    gc.freeze()
    try:
        # forked workers inherit the cases: generating them again would cost each worker seconds
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            chunks = pool.map(_run_indices, [list(range(i, len(cases), jobs * 8)) for i in range(jobs * 8)])
    finally:
        gc.unfreeze()
        logging.disable(logging.NOTSET)
        _CASES.clear()
    return [outcome for chunk in chunks for outcome in chunk]


_CASES: list[Any] = []
_FP16: list[bool] = [False]


def markdown_by_op(outcomes: list[Outcome]) -> str:
    """docs/coreml.md's table: per op type, the cases holding it that are correct in each mode, and
    the commonest reason a case holding it is refused with weights as initializers."""
    rows = []
    for op in sorted(MOBILE_OPS):
        mine = [o for o in outcomes if op in o.ops]
        if not mine:
            continue
        total = len(mine) // len(MODES)
        correct = [sum(o.kind == "correct" and o.mode == mode for o in mine) for mode in MODES]
        refused = [o for o in mine if o.mode == MODES[1] and o.kind == "refused" and _blames(o.detail, op)]
        reasons = Counter(_reason(o.detail) for o in refused).most_common(1)
        why = f"{reasons[0][0]} ({reasons[0][1]})" if reasons else ""
        snrs = [o.fp16_snr_db for o in mine if o.mode == MODES[1] and o.fp16_snr_db is not None]
        rows.append(f"| {op} | {total} | {correct[0]} | {correct[1]} | {_snr_cell(snrs)} | {why} |")
    head = (
        "| op | cases | correct, as generated | correct, initializers | fp16 SNR, worst case (dB) "
        "| commonest refusal (initializers) |"
    )
    return "\n".join([head, "|---|---|---|---|---|---|", *rows])


def _snr_cell(snrs: list[float]) -> str:
    if not snrs:
        return ""
    worst = min(snrs)
    return "exact" if worst == float("inf") else f"{worst:.0f}"


def _blames(detail: str, op: str) -> bool:
    """Whether a refusal is about `op` (or about the whole program), not another op of the case."""
    named = re.match(r"(\w+) x\d+:", detail)
    return named is None or named.group(1) == op


def _reason(detail: str) -> str:
    """A refusal's reason without node names, short enough for a table cell."""
    if re.fullmatch(r"\w+ x\d+: \S*", detail):
        return "no lowering"
    reason = detail.split("(", 1)[1].rsplit(")", 1)[0] if "(" in detail else detail
    reason = reason.replace("cannot lower to CoreML: ", "").replace("|", "/")
    return reason if len(reason) <= 70 else reason[:67] + "..."


def _run_indices(indices: list[int]) -> list[Outcome]:
    outcomes = []
    for index in indices:
        case = _CASES[index]
        first = run_case(case, MODES[0], fp16=_FP16[0])
        if len(case.model.graph.input) <= 1:
            second = Outcome(case.name, MODES[1], first.kind, first.ops, first.detail, first.fp16_snr_db)
        else:
            second = run_case(case, MODES[1], fp16=_FP16[0])
        outcomes += [first, second]
    return outcomes


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument(
        "--markdown", action="store_true", help="print the by-op table of docs/coreml.md (runs fp16 too)"
    )
    parser.add_argument("--ci-sample", action="store_true", help="only the cases CI runs")
    args = parser.parse_args()
    cases = mobile_cases()
    outcomes = run_suite(ci_sample(cases) if args.ci_sample else cases, args.jobs, fp16=args.markdown)
    for mode, counts in tally(outcomes).items():
        print(mode, " ".join(f"{kind}={counts[kind]}" for kind in OUTCOMES))
    if args.markdown:
        print(markdown_by_op(outcomes))
    if args.json:
        args.json.write_text(json.dumps([outcome.__dict__ for outcome in outcomes], indent=1))


if __name__ == "__main__":
    main()
