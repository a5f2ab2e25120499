"""Plots (matplotlib, Agg) and the self-contained report.html.

Plots are drawn in the driver from the aggregated series in `Metrics`; every time plot
shades the fault windows (one colour per fault type) and marks leader changes with
thin vertical lines, so a dip can be read against what the nemesis did.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from analysis import model
from analysis.metrics import Metrics
from analysis.model import OPS

PLOTS = ("rate.png", "latency-raw.png", "latency-quantiles.png", "flow.png", "cpu.png")
COLOURS = ("#f4a582", "#92c5de", "#b8e186", "#fdb863", "#c2a5cf", "#d9d9d9")


def _decorate(ax: Axes, m: Metrics) -> None:
    colours: dict[str, str] = {}
    for w in m.windows:
        first = w.fault not in colours
        colour = colours.setdefault(w.fault, COLOURS[len(colours) % len(COLOURS)])
        ax.axvspan((w.start_ns - m.t0_ns) / 1e9, (w.stop_ns - m.t0_ns) / 1e9, color=colour,
                   alpha=0.35, label=f"fault: {w.fault}" if first else None)
    for i, (_queue, t) in enumerate(m.leader_changes):
        ax.axvline(t, color="black", linewidth=0.5, alpha=0.6,
                   label="leader change" if i == 0 else None)
    ax.set_xlabel("time since start (s)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="upper right")


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _finish(fig: Any, ax: Axes, m: Metrics, path: Path, title: str, ylabel: str,
            log: bool = False) -> Path:
    """Label a plot, shade its fault windows, save it; its path."""
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _decorate(ax, m)
    _save(fig, path)
    return path


def _line(ax: Axes, series: dict[int, int], bucket_s: float, label: str) -> None:
    xs = sorted(series)
    ax.plot([x * bucket_s for x in xs], [series[x] / bucket_s for x in xs], label=label,
            marker=".", markersize=3)


def _rates(m: Metrics, path: Path, bucket_s: float) -> Path:
    """rate.png: the four client operations in all; below, confirms per queue when there
    are several queues, and confirms sent per broker node when channels recorded them."""
    queues = sorted({q for op, q in m.rate_by_queue if op == "confirm"}, key=str)
    nodes = sorted({n for kind, n in m.rate_by_node if kind == "confirm_out"})
    panels = 1 + (len(queues) > 1) + bool(nodes)
    fig, axes = plt.subplots(panels, 1, figsize=(9, 3.5 * panels), sharex=True, squeeze=False)
    top, rest = axes[0][0], [row[0] for row in axes[1:]]
    for op in OPS:
        _line(top, m.rate.get(op, {}), bucket_s, op)
    if len(queues) > 1:
        ax = rest.pop(0)
        for q in queues:
            _line(ax, m.rate_by_queue[("confirm", q)], bucket_s, str(q))
        ax.set_ylabel("confirms/s")
        ax.set_title("confirms per queue")
        _decorate(ax, m)
    if nodes:
        ax = rest.pop(0)
        for n in nodes:
            _line(ax, m.rate_by_node[("confirm_out", n)], bucket_s, n)
        ax.set_ylabel("confirms/s")
        ax.set_title("confirms sent per broker node")
        _decorate(ax, m)
    return _finish(fig, top, m, path, "throughput", "ops/s")


def _resources(m: Metrics, path: Path) -> Path:
    """cpu.png: CPU per process and, below it when sampled, resident memory."""
    fig, axes = plt.subplots(1 + bool(m.rss), 1, figsize=(9, 3.5 * (1 + bool(m.rss))),
                             sharex=True, squeeze=False)
    top = axes[0][0]
    for node, pts in sorted(m.cpu.items()):
        top.plot([p[0] for p in pts], [p[1] * 100 for p in pts], label=node)
    if m.rss:
        ax = axes[1][0]
        for node, pts in sorted(m.rss.items()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=node)
        ax.set_ylabel("RSS (MiB)")
        ax.set_title("resident memory per process")
        _decorate(ax, m)
    return _finish(fig, top, m, path, "CPU per process", "CPU %")


def plot_all(m: Metrics, out: Path, bucket_s: float) -> list[Path]:
    """Write the five PNGs into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    paths.append(_rates(m, out / "rate.png", bucket_s))

    fig, ax = plt.subplots(figsize=(9, 3.5))
    for series in sorted({s for s, _, _ in m.raw}):
        pts = [(x, y) for s, x, y in m.raw if s == series]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=3, alpha=0.5, label=series)
    paths.append(_finish(fig, ax, m, out / "latency-raw.png", "latencies (sampled)",
                         "latency (ms)", log=True))

    fig, ax = plt.subplots(figsize=(9, 3.5))
    seconds = sorted(s for (_, s) in m.hist_by_second)
    for q in ("p50", "p95", "p99"):
        ys = [model.percentiles(m.hist_by_second[("end_to_end", s)]).get(q, float("nan"))
              for s in seconds]
        ax.plot([s * bucket_s for s in seconds], ys, label=f"end-to-end {q}")
    maxes = [model.bucket_value_ms(max(m.hist_by_second[("end_to_end", s)])) for s in seconds]
    ax.plot([s * bucket_s for s in seconds], maxes, label="end-to-end max (bucket)", alpha=0.6)
    paths.append(_finish(fig, ax, m, out / "latency-quantiles.png",
                         "latency quantiles per bucket", "latency (ms)", log=True))

    fig, ax = plt.subplots(figsize=(9, 3.5))
    last = int(max((stop for _, _, stop, _ in m.blocked), default=0)) + 1
    counts = [sum(1 for _, a, b, _ in m.blocked if a < s + 1 and b >= s) for s in range(last)]
    ax.step(range(last), counts, where="post", label="blocked entities")
    paths.append(_finish(fig, ax, m, out / "flow.png", "credit flow", "blocked"))

    paths.append(_resources(m, out / "cpu.png"))
    return paths


def _table(rows: list[dict[str, Any]], anchor_for: dict[str, str] | None = None) -> str:
    if not rows:
        return "<p>none</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            text = html.escape("" if r[c] is None else str(r[c]))
            if anchor_for and c == "check" and r[c] in anchor_for:
                text = f'<a href="#{anchor_for[r[c]]}">{text}</a>'
            cls = f' class="{r[c]}"' if c == "status" else ""
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def write_html(path: Path, summary: dict[str, Any], verdicts: list[dict[str, Any]],
               violations: dict[str, list[dict[str, Any]]], plots: list[Path]) -> None:
    """report.html with the PNGs inlined (base64) so the file stands alone."""
    anchors = {c: f"violations-{c}" for c, rows in violations.items() if rows}
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>warren analysis</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
        ".pass{background:#d9f2d9}.fail{background:#f7c6c6}.unknown{background:#fbe9b7}"
        ".skipped{color:#888}</style></head><body>",
        f"<h1>warren run {html.escape(str(summary.get('run_id')))}: "
        f"valid = {html.escape(json.dumps(summary.get('valid')))}</h1>",
        "<h2>Verdicts</h2>", _table(verdicts, anchors),
        "<h2>Plots</h2>",
    ]
    for p in plots:
        data = base64.b64encode(p.read_bytes()).decode()
        parts.append(f'<figure><img alt="{p.name}" data-file="{p.name}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{p.name}</figcaption>'
                     "</figure>")
    parts.append("<h2>Top violations</h2>")
    for check, rows in violations.items():
        if rows:
            parts.append(f'<h3 id="{anchors[check]}">{html.escape(check)} '
                         f"(full list: violations/{html.escape(check)}.parquet)</h3>")
            parts.append(_table(rows))
    parts.append("<h2>Metrics</h2><pre>"
                 + html.escape(json.dumps(summary.get("metrics"), indent=2, default=str))
                 + "</pre>")
    parts.append("<h2>Run configuration</h2><pre>"
                 + html.escape(json.dumps(summary.get("run"), indent=2, default=str))
                 + "</pre></body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
