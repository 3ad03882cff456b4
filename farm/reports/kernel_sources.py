"""Which source nodes each profiled kernel ran, for the terminal: the report's op alignment
(farm/reports/alignment.py) read the other way round, kernel -> nodes.

ONNX Runtime names a kernel after the last node it absorbed (`Clip_9.out_nchwc` is the NCHWc Conv
that ran Conv_7, BatchNormalization_8 and Clip_9): without this the terminal shows a Clip where a
Conv ran."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ondevice_farm.reports.alignment import Alignment

#: cell certainties that say which nodes a kernel ran (a guess, or a bare placement, does not)
TRACED = frozenset({"exact", "fused", "partition"})


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
    from ondevice_farm.errors import FarmError
    from ondevice_farm.reports.alignment import align, source_nodes
    from ondevice_farm.reports.compare import columns_of
    from ondevice_farm.reports.document import locate_model

    model = locate_model(document, None, artifacts_root)
    if model is None:
        return None
    try:
        nodes = source_nodes(model)
    except FarmError:
        return None
    columns = columns_of(document)
    alignment = align(nodes, columns)
    return {index: kernel_sources(alignment, column.label) for index, column in enumerate(columns)}
