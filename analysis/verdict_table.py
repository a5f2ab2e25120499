"""The verdict table as plain text that fits a terminal.

`warren analyze`, `warren scenario run` and the pytest plugin print the same table. In
an 80-column terminal a table with every note in full wraps each note one word a line,
so it is laid out for the terminal's width here: the short columns (check names,
statuses, numbers) keep their full width, the `sample` column gets what is left after
the notes (whole ids only) and is dropped when that is less than one id, and a note
that does not fit is cut with an ellipsis. When even a short note has no room beside
the row, each note goes on a line of its own under its row. The full notes and
samples stay in `summary.json` and `report.html`. Pure: the width is passed in
(`terminal_width` reads it).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass

GAP = "  "
ELLIPSIS = "…"
#: a note gets a column of its own only when this many characters of it fit
NOTE_MIN = 30
#: a narrower sample column is left out (an id is up to 11 digits)
SAMPLE_MIN = 11
#: how far a note under its row is indented
NOTE_INDENT = "    "


def terminal_width() -> int:
    """The terminal's width in columns: `COLUMNS` when set, else the terminal's own,
    else 80 (output to a file or pipe)."""
    return shutil.get_terminal_size().columns


@dataclass(frozen=True)
class Fitted:
    """The table's lines; `row_lines[i]` is the line of row `i`, and `spans` where each
    shown column sits on the header and row lines (start, end), to colour a cell."""

    lines: list[str]
    row_lines: list[int]
    spans: dict[str, tuple[int, int]]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis marking a cut."""
    if len(text) <= width:
        return text
    return text[:max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def cut_list(text: str, width: int) -> str:
    """A comma-separated list in at most `width` characters: the items that fit whole,
    then an ellipsis (a cut id would read as another id)."""
    if len(text) <= width:
        return text
    items = text.split(",")
    kept = 0
    while kept < len(items) and len(",".join([*items[:kept + 1], ELLIPSIS])) <= width:
        kept += 1
    return ",".join([*items[:kept], ELLIPSIS]) if kept else cut(text, width)


def _one_line(value: object) -> str:
    return " ".join(str(value if value is not None else "").split())


def _widths(columns: Sequence[str], cells: list[list[str]], width: int, note: str,
            sample: str) -> tuple[dict[str, int], bool]:
    """Each shown column's width, and whether notes go under their rows."""
    natural = {c: max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)}
    if sum(natural.values()) + len(GAP) * (len(columns) - 1) <= width:
        return natural, False
    fixed = [c for c in columns if c not in (note, sample)]
    avail = width - sum(natural[c] for c in fixed) - len(GAP) * (len(fixed) - 1)
    widths = {c: natural[c] for c in fixed}
    below = note in natural and avail - len(GAP) < min(NOTE_MIN, natural[note])
    if note in natural and not below:
        widths[note] = min(natural[note], avail - len(GAP))
        avail -= widths[note] + len(GAP)
    if sample in natural and avail - len(GAP) >= min(SAMPLE_MIN, natural[sample]):
        widths[sample] = min(natural[sample], avail - len(GAP))
    return {c: widths[c] for c in columns if c in widths}, below


def fit(columns: Sequence[str], rows: Sequence[Sequence[object]], width: int,
        note: str = "note", sample: str = "sample") -> Fitted:
    """Lay out `rows` (values in `columns` order) in lines of at most `width` characters
    (below about 60 columns the short columns themselves are cut)."""
    cells = [[_one_line(v) for v in r] for r in rows]
    widths, below = _widths(columns, cells, width, note, sample)
    shown = [i for i, c in enumerate(columns) if c in widths]
    spans: dict[str, tuple[int, int]] = {}
    at = 0
    for i in shown:
        spans[columns[i]] = (at, at + widths[columns[i]])
        at += widths[columns[i]] + len(GAP)

    def cell(i: int, value: str) -> str:
        w = widths[columns[i]]
        return (cut_list if columns[i] == sample else cut)(value, w).ljust(w)

    def line(values: Sequence[str]) -> str:
        return cut(GAP.join(cell(i, values[i]) for i in shown).rstrip(), width)

    lines = [line(list(columns)), cut(GAP.join("-" * widths[columns[i]] for i in shown), width)]
    row_lines = []
    note_at = columns.index(note) if note in columns else None
    for r in cells:
        row_lines.append(len(lines))
        lines.append(line(r))
        if below and note_at is not None and r[note_at]:
            lines.append(cut(NOTE_INDENT + r[note_at], width))
    return Fitted(lines, row_lines, spans)
