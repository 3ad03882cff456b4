"""Each findings rule on the one crafted difference it names, and quiet where there is none."""

from __future__ import annotations

from ondevice_farm.reports.compare import compare
from ondevice_farm.reports.findings import RULES, find
from ondevice_farm.reports.findings.compile import fusion_only_on, node_count_gap, precision_differs
from ondevice_farm.reports.findings.jobs import job_failed
from ondevice_farm.reports.findings.latency import latency_gap, run_regression, unstable_latency
from ondevice_farm.reports.findings.numerics import reduced_precision, reference_failed, topk_disagreement
from ondevice_farm.reports.findings.placement import cpu_fallbacks, many_partitions
from ondevice_farm.reports.findings.preflight import PreflightCheck, preflight_mismatch
from tests.report.crafted import job, run

NNAPI, CPU = "NnapiExecutionProvider", "CPUExecutionProvider"
OPS = [
    ("Conv_1", "Conv", NNAPI, 400.0),
    ("MemcpyToHost", "MemcpyToHost", CPU, 50.0),
    ("Resize_40", "Resize", CPU, 300.0),
    ("MemcpyFromHost", "MemcpyFromHost", CPU, 50.0),
    ("Softmax_9", "Softmax", CPU, 200.0),
]


def test_quiet_on_identical_jobs() -> None:
    same = run(job("a", "ort/cpu"), job("b", "ort/cpu"))
    assert find(compare(same)) == []


def test_cpu_fallbacks_cost_includes_the_copies_around_them() -> None:
    [finding] = cpu_fallbacks(compare(run(job(ops=OPS, fallbacks=("Resize_40", "Softmax_9")))))
    assert finding.text.startswith("2 ops fall back to CPU on phone ort/nnapi, costing 60% of the op time")
    assert "the largest is Resize_40 (Resize, 0.300 ms)" in finding.text
    assert finding.evidence["transfer_us"] == 100.0
    assert [op["name"] for op in finding.evidence["ops"]] == ["Resize_40", "Softmax_9"]


def test_cpu_fallbacks_without_times_says_so() -> None:
    untimed = job(ops=[("Resize_40", "Resize", CPU, 0.0)], fallbacks=("Resize_40",))
    untimed["ops"][0]["mean_us"] = None
    [finding] = cpu_fallbacks(compare(run(untimed)))
    assert "no per-op time" in finding.text and finding.evidence["share"] is None


def test_cpu_target_has_no_fallbacks() -> None:
    assert cpu_fallbacks(compare(run(job(target="ort/cpu", ops=OPS)))) == []


def test_many_partitions() -> None:
    [finding] = many_partitions(compare(run(job(partitions=7), job("b", "ort/cpu", partitions=7))))
    assert "split into 7 partitions on phone ort/nnapi" in finding.text


def test_fusion_only_on_names_where_it_fired() -> None:
    findings = fusion_only_on(
        compare(run(job("a", "ort/cpu", fusions={"SkipLayerNormalization": 2}), job("b", "ort/nnapi")))
    )
    assert [f.text for f in findings] == [
        "SkipLayerNormalization fused on a ort/cpu only (not on b ort/nnapi)"
    ]


def test_node_count_gap() -> None:
    [finding] = node_count_gap(compare(run(job("a", nodes_after=10), job("b", nodes_after=25))))
    assert finding.evidence["nodes_after"] == {"a ort/nnapi": 10, "b ort/nnapi": 25}


def test_latency_gap_and_its_threshold() -> None:
    [finding] = latency_gap(compare(run(job("a", p50=1.0), job("b", p50=3.0))))
    assert finding.text.startswith("b ort/nnapi is 3.0x slower than a ort/nnapi at p50")
    assert latency_gap(compare(run(job("a", p50=1.0), job("b", p50=1.1)))) == []


def test_unstable_latency() -> None:
    [finding] = unstable_latency(compare(run(job(cv=0.4), job("b", cv=0.01))))
    assert finding.evidence == {"column": "phone ort/nnapi", "cv": 0.4}


def test_run_regression_compares_the_same_device_and_target() -> None:
    now, before = run(job(p50=1.5, run_id="new"), run_id="new"), run(job(p50=1.0, run_id="old"), run_id="old")
    [finding] = run_regression(compare(now, before))
    assert "50% slower in run new than in old" in finding.text
    assert run_regression(compare(now)) == []


def test_reference_failed_names_the_worst_output() -> None:
    [finding] = reference_failed(compare(run(job(snr_db=12.0, passed=False))))
    assert "worst output logits at 12.0 dB SNR" in finding.text and finding.weight == 1.0


def test_reduced_precision_within_and_beyond_fp16_rounding() -> None:
    fp32 = job("host", "ort/cpu", snr_db=120.0)
    [ok] = reduced_precision(compare(run(fp32, job("iphone", "coreml/ane", precision="fp16", snr_db=55.0))))
    assert "computes in fp16: SNR 55.0 dB on logits vs 120.0 dB on fp32 targets, within" in ok.text
    [bad] = reduced_precision(compare(run(fp32, job("iphone", "coreml/ane", precision="fp16", snr_db=12.0))))
    assert "below what fp16 rounding explains" in bad.text and bad.weight > ok.weight


def test_topk_disagreement_reads_recorded_topk() -> None:
    j = job()
    j["reference"]["outputs"]["logits"]["topk"] = {"k": 5, "top1_match": False, "top5_overlap": 0.6}
    [finding] = topk_disagreement(compare(run(j)))
    assert "different top-1 class on logits" in finding.text
    assert topk_disagreement(compare(run(job()))) == []


def test_job_failed() -> None:
    failed = {
        "job_id": "x",
        "run_id": "run-a",
        "device": "pixel8",
        "target": "ort/qnn",
        "status": "failed",
        "error": "device lost",
        "error_type": "DeviceLostError",
    }
    [finding] = job_failed(compare(run(job(), failed)))
    assert finding.text == "pixel8 ort/qnn failed: device lost"


def test_preflight_mismatch() -> None:
    check = PreflightCheck("s23 ort/nnapi", predicted=["Where_3"], observed=["Where_3", "/Resize"])
    [finding] = preflight_mismatch([check])
    assert finding.evidence["unexpected"] == ["/Resize"] and finding.evidence["confirmed"] == ["Where_3"]
    assert preflight_mismatch([PreflightCheck("x", ["a"], ["a"])]) == []


def test_ranking_puts_failures_first() -> None:
    findings = find(
        compare(
            run(
                job("a", p50=1.0, ops=OPS, fallbacks=("Resize_40",)),
                job("b", p50=2.0, snr_db=5.0, passed=False),
            )
        )
    )
    assert findings[0].rule == "reference_failed"
    assert [f.weight for f in findings] == sorted((f.weight for f in findings), reverse=True)
    assert len(RULES) == len({r.__name__ for r in RULES})


def test_a_noisy_regression_says_so_and_weighs_less() -> None:
    now = run(job(p50=1.5, run_id="new", cv=0.5), run_id="new")
    [noisy] = run_regression(compare(now, run(job(p50=1.0, run_id="old"), run_id="old")))
    assert "a run is noisy (cv 0.50 and 0.01)" in noisy.text
    [steady] = run_regression(
        compare(run(job(p50=1.5, run_id="new"), run_id="new"), run(job(p50=1.0, run_id="old"), run_id="old"))
    )
    assert noisy.weight < steady.weight


def test_latency_gap_leaves_the_second_run_to_run_regression() -> None:
    now, before = run(job(p50=1.0, run_id="new"), run_id="new"), run(job(p50=3.0, run_id="old"), run_id="old")
    assert latency_gap(compare(now, before)) == []


def test_reduced_precision_against_the_host_prediction() -> None:
    fp32 = job("host", "ort/cpu", snr_db=120.0)
    explained = compare(run(fp32, job("iphone", "coreml/ane", precision="fp16", snr_db=56.0)))
    explained.predicted_snr_db = {"fp16": {"logits": 58.4}}
    [ok] = reduced_precision(explained)
    assert "the host fp16 prediction gives 58.4 dB, so fp16 rounding explains the difference" in ok.text
    worse = compare(run(fp32, job("iphone", "coreml/ane", precision="fp16", snr_db=35.0)))
    worse.predicted_snr_db = {"fp16": {"logits": 58.4}}
    [bad] = reduced_precision(worse)
    assert "23.4 dB below the host fp16 prediction (58.4 dB)" in bad.text and bad.weight > ok.weight
    assert bad.evidence["predicted_snr_db"] == 58.4


def test_layout_ops_are_not_fusions() -> None:
    reorder = compare(run(job("a", "ort/cpu", fusions={"ReorderOutput": 1}), job("b", "ort/nnapi")))
    assert fusion_only_on(reorder) == []


def test_precision_differs_names_each_target_per_op_group() -> None:
    int8, fp16 = job("a", "ort/nnapi"), job("b", "coreml/ane")
    int8["compile"]["op_precision"] = {"conv": {"int8": 20}, "add": {"fp32": 3}}
    fp16["compile"]["op_precision"] = {"conv": {"fp16": 20}, "add": {"fp32": 3}, "norm": {"fp16": 2}}
    [finding] = precision_differs(compare(run(int8, fp16)))
    assert finding.text == "b coreml/ane runs conv in fp16; a ort/nnapi runs conv in int8"
    assert finding.evidence == {
        "op_group": "conv",
        "precision": {"a ort/nnapi": "int8", "b coreml/ane": "fp16"},
    }
    assert precision_differs in RULES


def test_precision_differs_is_quiet_where_the_groups_agree() -> None:
    a, b = job("a", "ort/cpu"), job("b", "coreml/ane")
    a["compile"]["op_precision"] = b["compile"]["op_precision"] = {"conv": {"int8": 4}}
    assert precision_differs(compare(run(a, b))) == []


def test_precision_differs_from_what_the_source_model_asks_for() -> None:
    folded = job("a", "coreml/gpu")
    folded["compile"]["op_precision"] = {"conv": {"fp16": 6}}
    folded["compile"]["source_op_precision"] = {"conv": {"int8": 6}}
    [finding] = precision_differs(compare(run(folded)))
    assert finding.text == "a coreml/gpu runs conv in fp16; the source model has it in int8"
    assert finding.evidence["source"] == "int8"


def test_precision_differs_leaves_fp16_against_fp32_to_reduced_precision() -> None:
    ane, cpu = job("a", "coreml/ane"), job("b", "ort/cpu")
    ane["compile"]["op_precision"] = {"conv": {"fp16": 6}}
    cpu["compile"]["op_precision"] = {"conv": {"fp32": 6}}
    ane["compile"]["source_op_precision"] = cpu["compile"]["source_op_precision"] = {"conv": {"fp32": 6}}
    assert precision_differs(compare(run(ane, cpu))) == []
