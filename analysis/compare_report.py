"""The side-by-side comparison as text (the terminal) and as compare.html / compare.json.

One column per run (its release), one line per figure, so four releases fit an
80-column terminal; below it the delivery figures that differ and example messages
whose `x-delivery-count` sequence or fate differs between the runs.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from analysis.compare import Comparison

__all__ = ["FIGURES", "format_text", "write_outputs"]

#: figure -> its label in the table, in the table's order
FIGURES: dict[str, str] = {
    "confirmed_msgs_s": "confirmed msg/s",
    "confirm_p50_ms": "confirm p50 ms",
    "confirm_p99_ms": "confirm p99 ms",
    "end_to_end_p50_ms": "end-to-end p50 ms",
    "end_to_end_p99_ms": "end-to-end p99 ms",
    "bytes_per_queued_msg": "RSS bytes per queued msg",
    "peak_backlog": "peak backlog (msgs)",
    "published": "published",
    "acked": "acked",
    "deliveries": "deliveries",
    "first_delivery_count": "x-delivery-count, 1st delivery",
    "requeued_msgs": "requeued messages",
    "requeued_removed_by_broker": "requeued, removed by broker",
    "max_deliveries_per_msg": "most deliveries of one msg",
    "requeue_distance_median": "requeue distance (median)",
    "requeue_distance_max": "requeue distance (max)",
}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def table_rows(result: Comparison) -> list[list[str]]:
    """Header row (``figure`` and each run's label), then one row per figure."""
    rows = [["figure", *(r.label for r in result.rows)]]
    for key, label in FIGURES.items():
        rows.append([label, *(_cell(getattr(r, key)) for r in result.rows)])
    return rows


def _differences(result: Comparison) -> list[str]:
    lines = []
    for key, values in result.differing.items():
        shown = ", ".join(f"{label} {_cell(v)}" for label, v in values.items())
        lines.append(f"{FIGURES.get(key, key)} differs: {shown}")
    lines.append(f"messages delivered differently: {result.messages_differing} of "
                 f"{result.messages_compared} delivered in every run")
    for msg_id, per_run in result.examples.items():
        lines.append(f"message {msg_id}:")
        lines.extend(f"  {label}: {text}" for label, text in per_run.items())
    return lines


def format_text(result: Comparison) -> str:
    """The table and the differences, for a terminal."""
    rows = table_rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in rows]
    scenarios = sorted({r.scenario for r in result.rows})
    head = f"{', '.join(scenarios) or 'runs'} side by side"
    return "\n".join([head, *lines, "", *_differences(result)])


def _html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows[1:])
    return f"<table><tr>{head}</tr>{body}</table>"


def write_outputs(result: Comparison, out: Path) -> None:
    """compare.html (the releases side by side) and compare.json (every figure)."""
    runs = ", ".join(f"{r.label}: {r.run_id}" for r in result.rows)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>warren: releases side "
        "by side</title><style>body{font-family:sans-serif;margin:2em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
        "font-size:13px}td{text-align:right}td:first-child{text-align:left}</style>"
        "</head><body>",
        "<h1>Releases side by side</h1>", f"<p>runs: {html.escape(runs)}</p>",
        _html_table(table_rows(result)),
        "<h2>Where deliveries differ</h2><ul>",
        *(f"<li>{html.escape(line)}</li>" for line in _differences(result)),
        "</ul></body></html>",
    ]
    (out / "compare.html").write_text("\n".join(parts), encoding="utf-8")
    data = {"runs": [r.figures() for r in result.rows], "differing": result.differing,
            "examples": {str(k): v for k, v in result.examples.items()},
            "messages_differing": result.messages_differing,
            "messages_compared": result.messages_compared}
    (out / "compare.json").write_text(json.dumps(data, indent=1, default=str),
                                      encoding="utf-8")
