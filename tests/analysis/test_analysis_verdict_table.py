"""The verdict table fits the terminal it is printed in: no line is wider than the
terminal, every check is named in full, and a note too long for the room left is cut
with an ellipsis instead of wrapping a word a line (whole notes stay in `summary.json`
and `report.html`)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from analysis.analyze import format_table
from analysis.model import CHECKS
from analysis.verdict_table import ELLIPSIS, fit

LONG_NOTE = ("2 decisions and 2 client deliveries not decidable: the sender's history has "
             "a hole (killed before its buffer was written)")
SAMPLE = ",".join(str(2**36 * k + 17) for k in range(1, 6))


def rows() -> list[dict[str, Any]]:
    out = []
    for i, check in enumerate(CHECKS):
        out.append({"check": check, "status": ("pass", "fail", "unknown", "skipped")[i % 4],
                    "examined": 12_345 * i, "violations": i % 3,
                    "sample": SAMPLE if i % 3 else "", "note": LONG_NOTE if i % 2 else ""})
    return out


def named(check: str, lines: list[str]) -> bool:
    return any(re.search(rf"(^|\s){re.escape(check)}(\s|$)", line) for line in lines)


@pytest.mark.parametrize("width", [80, 120])
def test_the_table_fits_the_terminal_and_names_every_check(
        width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    lines = format_table(rows()).splitlines()
    assert max(len(line) for line in lines) <= width
    assert all(named(check, lines) for check in CHECKS)
    # a note is cut, not wrapped: its start is on one line, ending in an ellipsis
    noted = [line for line in lines if "2 decisions and 2 client" in line]
    assert len(noted) == len(CHECKS) // 2
    assert all(line.endswith(ELLIPSIS) for line in noted)


def test_a_table_that_fits_is_shown_whole() -> None:
    lines = format_table(rows(), width=400).splitlines()
    assert sum(LONG_NOTE in line for line in lines) == len(CHECKS) // 2
    assert sum(SAMPLE in line for line in lines) == sum(1 for r in rows() if r["sample"])
    assert not any(ELLIPSIS in line for line in lines)


def test_notes_go_under_their_rows_when_no_room_is_left_beside_them() -> None:
    table = fit(["check", "status", "note"], [["ordering_consumer_monotonic", "unknown",
                                               LONG_NOTE], ["total_queue", "pass", ""]], 40)
    assert table.lines[table.row_lines[0]].split() == ["ordering_consumer_monotonic",
                                                       "unknown"]
    assert table.lines[table.row_lines[0] + 1].startswith("    2 decisions")
    assert table.row_lines[1] == table.row_lines[0] + 2  # an empty note takes no line
    assert max(len(line) for line in table.lines) <= 40
