"""Per-process history recorder: the sink behind `actors.trace.emit`.

Events are appended to in-memory column lists (no I/O per event) and written as one
Arrow record batch per table every `flush_events` events or `flush_interval_s`
seconds. The on-disk format is an Arrow IPC stream, readable up to its last complete
batch, because the kill nemesis SIGKILLs node processes and a Parquet file without
its footer is unreadable. Segments rotate at `segment_bytes`.

Layout: `<run_dir>/raw/<table>/<node>/<process>-<os pid>-<n>.arrows`.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from analysis import schema

FLUSH_EVENTS = 10_000
FLUSH_INTERVAL_S = 1.0
SEGMENT_BYTES = 64 * 1024 * 1024
#: the `extra` column's JSON (one encoder: `json.dumps` with options builds one per call)
_EXTRA = json.JSONEncoder(default=repr, sort_keys=True)


class _TableWriter:
    """Buffered columns and the current IPC segment of one table."""

    def __init__(self, table: str, directory: Path, process: str, segment_bytes: int) -> None:
        self.table = table
        self.schema = schema.schema_of(table)
        self.names = self.schema.names
        #: the payload columns an event may fill (everything else goes to `extra`)
        self.known = frozenset(self.names)
        #: buffered rows, one tuple of every column per event (turned into columns at
        #: a flush: one transpose for the batch instead of an append per column and
        #: event)
        self.rows: list[tuple[Any, ...]] = []
        self.directory = directory
        self.process = process
        self.segment_bytes = segment_bytes
        self.segment = 0
        self.sink: pa.NativeFile | None = None
        self.writer: ipc.RecordBatchStreamWriter | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def append(self, row: dict[str, Any]) -> None:
        self.rows.append(tuple(map(row.get, self.names)))

    def flush(self) -> None:
        if not self.rows:
            return
        columns = zip(*self.rows, strict=True)
        batch = pa.record_batch(
            [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=True)],
            schema=self.schema,
        )
        self.rows = []
        if self.writer is None:
            self._open()
        assert self.writer is not None and self.sink is not None
        self.writer.write_batch(batch)
        self.sink.flush()
        if self.sink.tell() >= self.segment_bytes:
            self.close()
            self.segment += 1

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # one name per OS process and segment: a node restarted in the same run
        # writes beside what its killed predecessor recorded, never over it
        path = self.directory / f"{self.process}-{os.getpid()}-{self.segment}.arrows"
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = ipc.new_stream(self.sink, self.schema)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.sink is not None:
            self.sink.close()
        self.writer = None
        self.sink = None


def _pop_or(fields: dict[str, Any], key: str, default: Any) -> Any:
    value = fields.pop(key, None)
    return default if value is None else value


class Recorder:
    """Routes emitted events to their tables and writes them in batches.

    `sink` has the signature `actors.trace` expects; the caller installs it
    (`actors.trace.set_sink(recorder.sink)`). Calls may come from many greenlets or
    threads of one process: a lock guards the buffers, and only a flush does I/O.
    """

    def __init__(
        self,
        run_dir: str | Path,
        run_id: str,
        node: str,
        process: str | None = None,
        *,
        flush_events: int = FLUSH_EVENTS,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        segment_bytes: int = SEGMENT_BYTES,
        clock: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], int] = time.time_ns,
        register_atexit: bool = True,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.node = node
        self.process = process or node
        self.flush_events = flush_events
        self.flush_interval_ns = int(flush_interval_s * 1e9)
        self.segment_bytes = segment_bytes
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._writers: dict[str, _TableWriter] = {}
        self._seq: dict[str, int] = {}
        self._pending = 0
        self._last_flush = clock()
        self._closed = False
        if register_atexit:
            atexit.register(self.close)

    def sink(self, kind: str, fields: dict[str, Any]) -> None:
        """Record one event; `fields` may override envelope columns and name a `table`."""
        now = self._clock()
        with self._lock:
            if self._closed:
                return
            self._record(kind, fields, now)
            self._pending += 1
            if (self._pending >= self.flush_events
                    or now - self._last_flush >= self.flush_interval_ns):
                self._flush_locked(now)

    def record(self, kind: str, **fields: Any) -> None:
        """Keyword form of `sink`, for code that holds the recorder directly."""
        self.sink(kind, fields)

    def _record(self, kind: str, fields: dict[str, Any], now: int) -> None:
        fields = dict(fields)
        table = fields.pop("table", None) or schema.table_for(kind)
        writer = self._writers.get(table)
        if writer is None:
            writer = _TableWriter(table, self.run_dir / "raw" / table / self.node,
                                  self.process, self.segment_bytes)
            self._writers[table] = writer
        emitter = str(fields.pop("emitter", None) or self.process)
        seq = self._seq.get(emitter, -1) + 1
        self._seq[emitter] = seq
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "node": str(fields.pop("node", None) or self.node),
            "emitter": emitter,
            "seq": seq,
            "ts_ns": _pop_or(fields, "ts_ns", now),
            "wall_ns": _pop_or(fields, "wall_ns", None) or self._wall(),
            "kind": kind,
        }
        known = writer.known
        extra = None
        for k, v in fields.items():
            if k in known:
                row[k] = v
            else:
                if extra is None:
                    extra = {}
                extra[k] = v
        if extra:
            row["extra"] = _EXTRA.encode(extra)
        writer.append(row)

    def flush(self) -> None:
        """Write every buffered event now (also called by a periodic timer, if any)."""
        with self._lock:
            self._flush_locked(self._clock())

    def _flush_locked(self, now: int) -> None:
        for writer in self._writers.values():
            writer.flush()
        self._pending = 0
        self._last_flush = now

    def close(self) -> None:
        """Flush and close every segment; later events are ignored. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked(self._clock())
            for writer in self._writers.values():
                writer.close()
            self._closed = True
        atexit.unregister(self.close)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
