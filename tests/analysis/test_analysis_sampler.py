"""Every recorded process samples itself once a second into `samples`: cumulative CPU
seconds, resident memory, its longest mailbox and its open channels; a stopped sampler
takes a last sample, so a short run still ends with one."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.dataset as ds

from analysis.compact import compact
from analysis.recorder import Recorder
from analysis.sampler import Sampler, read_sample


def _node(*mailboxes: int) -> Any:
    procs = {i: SimpleNamespace(actor_inbox=[None] * n) for i, n in enumerate(mailboxes)}
    return SimpleNamespace(procs=procs)


def test_a_sample_reads_cpu_memory_mailboxes_and_channels() -> None:
    first = read_sample(_node(0, 5, 2), lambda: 3)
    spent = time.process_time()
    while time.process_time() - spent < 0.05:  # CPU between the two samples, past a tick
        sum(i * i for i in range(10_000))
    second = read_sample()
    assert second["cpu_user_s"] + second["cpu_sys_s"] > first["cpu_user_s"] + first["cpu_sys_s"]
    assert first["rss_bytes"] > 1 << 20
    assert (first["mailbox_max"], first["open_channels"]) == (5, 3)
    assert (second["mailbox_max"], second["open_channels"]) == (None, None)  # no node


def test_the_sampler_emits_until_stopped_and_once_more_at_stop() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    sampler = Sampler(_node(1), interval_s=0.01,
                      emit=lambda kind, **f: seen.append((kind, f))).start()
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    stopped = len(seen)
    time.sleep(0.05)
    assert stopped >= 4  # three while running, one more when stopped
    assert len(seen) == stopped  # nothing after stop
    assert {kind for kind, _ in seen} == {"sample"}
    assert all(f["mailbox_max"] == 1 for _, f in seen)


def test_samples_land_in_the_samples_table(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "client-1", "p", register_atexit=False)
    sampler = Sampler(interval_s=60, emit=rec.record).start()
    sampler.stop()
    rec.close()
    compact(tmp_path)
    rows = ds.dataset(tmp_path / "history" / "samples", partitioning="hive").to_table().to_pylist()
    assert len(rows) == 2  # the first, and the last at stop
    assert all(r["kind"] == "sample" and r["node"] == "client-1" and r["rss_bytes"] > 0
               and r["emitter"] == f"sampler/{os.getpid()}" for r in rows)
    assert rows[0]["cpu_user_s"] <= rows[1]["cpu_user_s"]
