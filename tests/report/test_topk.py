"""Top-k agreement for classifier-like outputs."""

from __future__ import annotations

import numpy as np

from ondevice_farm.analysis.topk import topk_agreement


def test_same_ranking_agrees() -> None:
    scores = np.array([[0.1, 0.5, 0.05, 0.2, 0.15, 0.0]], dtype=np.float32)
    noisy = scores + np.float32(1e-4)
    assert topk_agreement(scores, noisy) == {
        "k": 5,
        "reference": [1, 3, 4, 0, 2],
        "actual": [1, 3, 4, 0, 2],
        "top1_match": True,
        "top5_overlap": 1.0,
    }


def test_swapped_top1_is_reported() -> None:
    ref = np.array([0.4, 0.39, 0.1, 0.05, 0.04, 0.02], dtype=np.float32)
    got = np.array([0.39, 0.4, 0.1, 0.05, 0.02, 0.04], dtype=np.float32)
    result = topk_agreement(ref, got)
    assert result is not None and result["top1_match"] is False and result["top5_overlap"] == 0.8


def test_not_classifier_like() -> None:
    image = np.zeros((1, 3, 8, 8), dtype=np.float32)
    assert topk_agreement(image, image) is None
    assert topk_agreement(np.zeros(3, np.float32), np.zeros(3, np.float32)) is None  # fewer classes than k
    assert topk_agreement(np.zeros(6, np.int64), np.zeros(6, np.int64)) is None
    assert topk_agreement(np.zeros(6, np.float32), np.zeros(7, np.float32)) is None
