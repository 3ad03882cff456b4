"""Which source nodes each profiled kernel ran, for the terminal: the report's op alignment
(farm/ondevice_farm/reports/alignment.py) read the other way round, kernel -> nodes.

ONNX Runtime names a kernel after the last node it absorbed (`Clip_9.out_nchwc` is the NCHWc Conv
that ran Conv_7, BatchNormalization_8 and Clip_9): without this the terminal shows a Clip where a
Conv ran."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm.preflight.check import GraphNode

if TYPE_CHECKING:
    from ondevice_farm.reports.alignment import Alignment

#: cell certainties that say which nodes a kernel ran (a guess, or a bare placement, does not)
TRACED = frozenset({"exact", "fused", "partition"})
#: the source graph's nodes, beside the model in the artifact store (`artifacts/<sha>/`)
NODES_FILE = "graph_nodes.v1.json"


def kernel_sources(alignment: Alignment, label: str) -> dict[str, list[str]]:
    """Kernel name -> source node names, in graph order, for the column `label`."""
    found: dict[str, list[str]] = {}
    for row in alignment.rows:
        cell = row.cells.get(label)
        if cell is None or not cell.kernel or cell.certainty not in TRACED:
            continue
        guessed = set(row.uncertain.get(label, []))
        found.setdefault(cell.kernel, []).extend(s.name for s in row.sources if s.name not in guessed)
    return found


def kernel_sources_of(
    document: dict[str, Any], artifacts_root: Path | None = None
) -> dict[int, dict[str, list[str]]] | None:
    """Per job index of a run document, kernel -> source nodes; None where the source model is
    not found (neither where the run recorded it nor in the artifact store) or cannot be read."""
    if not any(job.get("ops") for job in document.get("jobs", [])):
        # no profiled kernel to name (--no-profile): reading the model (and importing onnx, 1-4 s
        # of CPU) would find nothing to show
        return {}
    from ondevice_farm.reports.alignment import align
    from ondevice_farm.reports.compare import columns_of

    nodes = _source_nodes(document, artifacts_root)
    if nodes is None:
        return None
    columns = columns_of(document)
    alignment = align(nodes, columns)
    return {index: kernel_sources(alignment, column.label) for index, column in enumerate(columns)}


def _source_nodes(document: dict[str, Any], artifacts_root: Path | None) -> list[GraphNode] | None:
    """The run's source graph: kept as JSON beside the model in the artifact store the first time
    it is read, so that the next report of the same model does not import onnx (1-4 s of CPU,
    more than the rest of a submit through a running `farm serve`)."""
    sha = str((document.get("model") or {}).get("sha256") or "")
    kept = artifacts_root / sha[:2] / sha / NODES_FILE if artifacts_root and len(sha) == 64 else None
    if kept is not None:
        try:
            return [
                GraphNode(str(n["name"]), str(n["op_type"]), tuple(n["inputs"]), tuple(n["outputs"]))
                for n in json.loads(kept.read_text(encoding="utf-8"))
            ]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not kept yet (or by something else): read the model
    from ondevice_farm.errors import FarmError
    from ondevice_farm.reports.alignment import source_nodes
    from ondevice_farm.reports.document import locate_model

    model = locate_model(document, None, artifacts_root)
    if model is None:
        return None
    try:
        nodes = source_nodes(model)
    except FarmError:
        return None
    if kept is not None and kept.parent.is_dir():
        from ondevice_farm.model_cache import write_atomically

        write_atomically(kept, json.dumps([dataclasses.asdict(n) for n in nodes]))
    return nodes
