"""Top-1/top-5 agreement of a classifier-like output with the reference.

The job document keeps error metrics per output but not the outputs, so this is computed where
the outputs still exist (`ondevice_farm.analysis.job`, next to `compare_outputs`) and stored under
`reference.outputs[name].topk`; the report reads it from there."""

from __future__ import annotations

from typing import Any

import numpy as np

DEFAULT_K = 5
#: more classes than this and fewer elements per row than `k` are not "classifier-like"
MAX_CLASSES = 100_000


def is_classifier_like(array: np.ndarray, k: int = DEFAULT_K) -> bool:
    """A float vector of scores (or a batch of them): last axis of at least k classes."""
    if array.dtype.kind != "f" or array.ndim == 0 or array.ndim > 2:
        return False
    return k <= array.shape[-1] <= MAX_CLASSES and (array.ndim == 1 or array.shape[0] <= 64)


def topk_agreement(reference: np.ndarray, actual: np.ndarray, k: int = DEFAULT_K) -> dict[str, Any] | None:
    """`{"k", "reference", "actual", "top1_match", "top5_overlap"}` for the first row of a
    classifier-like output (indices, best first), or None where the output is not one."""
    if reference.shape != actual.shape or not is_classifier_like(reference, k):
        return None
    ref_row = reference.reshape(-1, reference.shape[-1])[0].astype(np.float64)
    got_row = actual.reshape(-1, actual.shape[-1])[0].astype(np.float64)
    ref_top = [int(i) for i in np.argsort(-ref_row, kind="stable")[:k]]
    got_top = [int(i) for i in np.argsort(-got_row, kind="stable")[:k]]
    return {
        "k": k,
        "reference": ref_top,
        "actual": got_top,
        "top1_match": ref_top[0] == got_top[0],
        "top5_overlap": len(set(ref_top) & set(got_top)) / k,
    }


#: an index list longer than this is not a top-k result
MAX_INDEX_LIST = 100


def is_index_list(array: np.ndarray) -> bool:
    """An integer (batch, k) output whose first row holds k distinct indices: a TopK's indices."""
    if array.dtype.kind not in "iu" or array.ndim != 2 or not 2 <= array.shape[-1] <= MAX_INDEX_LIST:
        return False
    return bool(array.shape[0] <= 64 and len(set(array[0].tolist())) == array.shape[-1])


def index_agreement(reference: np.ndarray, actual: np.ndarray, k: int = DEFAULT_K) -> dict[str, Any] | None:
    """The same fields as `topk_agreement`, for an output that already is a list of class indices
    (best first): the first row's first `k` entries of each side."""
    if reference.shape != actual.shape or actual.dtype.kind not in "iu" or not is_index_list(reference):
        return None
    k = min(k, reference.shape[-1])
    ref_top = [int(i) for i in reference[0][:k]]
    got_top = [int(i) for i in actual[0][:k]]
    return {
        "k": k,
        "reference": ref_top,
        "actual": got_top,
        "top1_match": ref_top[0] == got_top[0],
        "top5_overlap": len(set(ref_top) & set(got_top)) / k,
    }
