"""What the Prometheus tests need to know about PromQL text: the series selectors in an
expression, and Grafana's variables in a panel's query."""

from __future__ import annotations

import re

#: words that look like metric names in PromQL but are operators or modifiers
KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
        "inf",
        "nan",
    }
)
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_OFFSET = re.compile(r"\boffset\s+-?\w+")
_TOKEN = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?")
GRAFANA_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")


def selectors(expr: str) -> list[str]:
    """The instant-vector selectors (`name{matchers}`) an expression reads, ranges and offsets dropped."""
    text = _OFFSET.sub(" ", _RANGE.sub(" ", _GROUPING.sub(" ", expr)))
    found = []
    for match in _TOKEN.finditer(text):
        name, matchers, call = match.group(1), match.group(2) or "", match.group(3)
        if call or name in KEYWORDS:
            continue
        found.append(name + matchers)
    return found


def matcher_labels(selector: str) -> set[str]:
    """The label names a selector's matchers name (`up{job="farm"}` -> {"job"})."""
    _, _, matchers = selector.partition("{")
    return set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", matchers))


def variables_used(text: str) -> set[str]:
    return {a or b for a, b in GRAFANA_VARIABLE.findall(text)}


def with_all_values(expr: str) -> str:
    """A panel query as Grafana sends it with every variable at its "All" value (`.*`)."""
    return GRAFANA_VARIABLE.sub(".*", expr)
