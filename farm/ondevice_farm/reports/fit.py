"""A wide terminal table made readable on a narrow terminal: its columns dealt out over several
tables, each repeating the columns that say which row is which, so no cell is ever cut.

Works on any rich Table, whatever columns its builder adds, so the compact layout follows the
full one without a second list of columns to keep in step."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

#: a column's share of the table's frame: a border and one space of padding either side
COLUMN_FRAME = 3
#: the table's own left border
TABLE_FRAME = 1


def _natural_width(console: Console, column: Column) -> int:
    """The width a column needs to show its header and every cell on one line."""
    widest = 0
    for cell in [column.header, *column.cells]:
        measured = Measurement.get(console, console.options.update(width=10_000), cell)
        widest = max(widest, measured.maximum)
    return widest + COLUMN_FRAME


def table_width(console: Console, table: Table) -> int:
    return TABLE_FRAME + sum(_natural_width(console, c) for c in table.columns)


def _copy(table: Table, columns: list[Column], title: str | None) -> Table:
    part = Table(title=title, title_justify=table.title_justify, box=table.box)
    for column in columns:
        part.add_column(column.header, justify=column.justify, no_wrap=True, overflow="fold")
    cells = [list(c.cells) for c in columns]
    for row in zip(*cells, strict=True):
        part.add_row(*row)
    return part


def fit_table(console: Console, table: Table, width: int, keep: int = 2) -> list[Table]:
    """`table` itself where it fits `width`; otherwise its first `keep` columns (the row's name)
    followed by as many of the others as fit, table after table. A column too wide even beside the
    kept ones still gets a table of its own, folded rather than cut."""
    if table_width(console, table) <= width:
        return [table]
    kept = table.columns[:keep]
    base = TABLE_FRAME + sum(_natural_width(console, c) for c in kept)
    groups: list[list[Column]] = []
    current: list[Column] = []
    used = base
    for column in table.columns[keep:]:
        need = _natural_width(console, column)
        if current and used + need > width:
            groups.append(current)
            current, used = [], base
        current.append(column)
        used += need
    if current:
        groups.append(current)
    title = str(table.title) if table.title else None
    parts = []
    for index, group in enumerate(groups):
        # the title once, over the first part: the others read as its continuation
        parts.append(_copy(table, [*kept, *group], title if index == 0 else None))
    return parts
