"""A job document in two parts: the summary every reader needs, and the bulky detail only the
views that show it load (docs/results.md, "Summary and bulky parts").

The results store keeps the summary in the job's row and the bulky parts in a row of their own,
so a reader of many jobs (`farm runs`, verdicts, the nightly's history, the metrics) never reads
a trace. `join_job(*split_job(doc)) == doc` for every document.
"""

from __future__ import annotations

from typing import Any

#: dotted paths into a job document of what is stored apart from its summary; `[]` after a key
#: means "in every element of that list". Verdicts, `farm runs`, the compare tables and the metrics
#: read the summary: the pooled `latency_ms.samples` stay in it (the latency verdict tests them),
#: the per-session copies of the same samples do not.
BULKY_JOB_KEYS: tuple[str, ...] = (
    "trace_events",  # the Chrome trace of the profile: most of a profiled job's bytes
    "ops",  # the per-op table (hundreds of rows at 200 ops)
    "compile.node_placement",  # node -> provider, one entry per node
    "latency_ms.repeats[].samples",  # each session's samples, pooled again in latency_ms.samples
)
EACH = "[]"


def _segments(pattern: str) -> list[str]:
    return pattern.split(".")


def _split(node: Any, segments: list[str], prefix: str, parts: dict[str, Any]) -> Any:
    """`node` without what `segments` names (a copy along the path; `node` itself is untouched)."""
    head, rest = segments[0], segments[1:]
    key = head.removesuffix(EACH)
    if not isinstance(node, dict) or key not in node:
        return node
    if not rest:
        copy = dict(node)
        parts[prefix + key] = copy.pop(key)
        return copy
    child = node[key]
    if head.endswith(EACH):
        if not isinstance(child, list):
            return node
        items = [_split(item, rest, f"{prefix}{key}.{i}.", parts) for i, item in enumerate(child)]
        changed: Any = items if any(a is not b for a, b in zip(items, child, strict=True)) else child
    else:
        changed = _split(child, rest, f"{prefix}{key}.", parts)
    if changed is child:
        return node
    copy = dict(node)
    copy[key] = changed
    return copy


def split_job(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary, parts): the document without its BULKY_JOB_KEYS, and what they held, by where
    (`{"ops": [...], "latency_ms.repeats.0.samples": [...]}`; empty when the job has none)."""
    parts: dict[str, Any] = {}
    summary: Any = document
    for pattern in BULKY_JOB_KEYS:
        summary = _split(summary, _segments(pattern), "", parts)
    return dict(summary), parts


def _put(node: Any, segments: list[str], value: Any) -> Any:
    head, rest = segments[0], segments[1:]
    if isinstance(node, list):
        items = list(node)
        index = int(head)
        items[index] = value if not rest else _put(items[index], rest, value)
        return items
    copy = dict(node) if isinstance(node, dict) else {}
    copy[head] = value if not rest else _put(copy.get(head), rest, value)
    return copy


def join_job(summary: dict[str, Any], parts: dict[str, Any] | None) -> dict[str, Any]:
    """The whole document again (`summary` itself is untouched). A restored key comes back after
    its siblings: equal as JSON, not byte for byte."""
    document: dict[str, Any] = summary
    for where, value in (parts or {}).items():
        document = _put(document, where.split("."), value)
    return dict(document)


def path_keys(path: str) -> list[str]:
    """`$.latency_ms.repeats[0].p50` -> ["latency_ms", "repeats", "0", "p50"]."""
    return [k for k in path.removeprefix("$").replace("[", ".").replace("]", "").split(".") if k]


def _pattern_keys(pattern: str) -> list[str | None]:
    """`latency_ms.repeats[].samples` -> ["latency_ms", "repeats", None, "samples"] (None: any index)."""
    keys: list[str | None] = []
    for segment in _segments(pattern):
        keys.append(segment.removesuffix(EACH))
        if segment.endswith(EACH):
            keys.append(None)
    return keys


def part_name(where: str) -> str:
    """The BULKY_JOB_KEYS entry that a key of split_job's parts (`latency_ms.repeats.0.samples`)
    belongs to: the store keeps each entry's parts in a row of their own."""
    keys = where.split(".")
    for pattern in BULKY_JOB_KEYS:
        wanted = _pattern_keys(pattern)
        if len(wanted) == len(keys) and all(w is None or w == k for w, k in zip(wanted, keys, strict=True)):
            return pattern
    raise ValueError(f"{where!r} is no bulky part of a job")


def parts_at(path: str) -> tuple[str, ...]:
    """The BULKY_JOB_KEYS entries that the value at the JSON `path` holds or is inside."""
    keys = path_keys(path)
    return tuple(
        pattern
        for pattern in BULKY_JOB_KEYS
        if all(w is None or w == k for w, k in zip(_pattern_keys(pattern), keys, strict=False))
    )


def needs_parts(path: str) -> bool:
    """Whether the value at the JSON `path` holds (or is inside) a bulky part."""
    return bool(parts_at(path))


def value_at(document: Any, path: str) -> Any:
    """The value at a JSON `path` (`$.a.b`, `$.a[0]`), None where there is none."""
    node = document
    for key in path_keys(path):
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node
