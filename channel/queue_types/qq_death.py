"""A stored message's death history and the headers it becomes (`mc:record_death`).

A dead-lettered message remembers, per (source queue, reason), how often it
died there and how it had been routed before. The
history travels with the message into the target queue, and a consumer reads
it as the `x-death` header (most recent death first) next to
`x-first-death-*` (fixed by the very first death) and `x-last-death-*`.
Keeping the records as data rather than as headers lets cycle detection read
them without decoding properties, and lets repeated deaths count up.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from typing import Any

from channel.queue_types.header_table import Long

__all__ = ["Death", "Deaths", "death_headers", "record"]


@dataclass(frozen=True, slots=True)
class Death:
    """One `x-death` table: deaths of the message in `queue` for `reason`."""

    queue: str
    reason: str
    #: exchange and routing keys the message had before its first death here
    exchange: str
    routing_keys: tuple[str, ...]
    count: int
    #: time of the first such death (ms since the epoch)
    time_ms: int
    #: the per-message TTL (`expiration` property) the message had, if any
    original_expiration: str | None = None


@dataclass(frozen=True, slots=True)
class Deaths:
    """The history: the first death's (queue, reason, exchange), records newest first."""

    first: tuple[str, str, str]
    records: tuple[Death, ...]

    def last(self) -> Death:
        return self.records[0]

    def queue_reasons(self) -> tuple[tuple[str, str], ...]:
        """(queue, reason) newest first: what cycle detection reads."""
        return tuple((d.queue, d.reason) for d in self.records)


def record(deaths: Deaths | None, reason: str, queue: str, exchange: str,
           routing_keys: tuple[str, ...], expiration: str | None, now_ms: int) -> Deaths:
    """The history after one more death; a repeated (queue, reason) counts up and
    moves to the front, keeping its first time, exchange and routing keys."""
    if deaths is None:
        death = Death(queue, reason, exchange, routing_keys, 1, now_ms, expiration)
        return Deaths((queue, reason, exchange), (death,))
    for i, d in enumerate(deaths.records):
        if (d.queue, d.reason) == (queue, reason):
            rest = deaths.records[:i] + deaths.records[i + 1:]
            return replace(deaths, records=(replace(d, count=d.count + 1), *rest))
    death = Death(queue, reason, exchange, routing_keys, 1, now_ms, expiration)
    return replace(deaths, records=(death, *deaths.records))


def _table(d: Death) -> dict[str, Any]:
    table: dict[str, Any] = {
        "count": Long(d.count),
        "reason": d.reason,
        "queue": d.queue,
        "time": datetime.datetime.fromtimestamp(d.time_ms // 1000, datetime.UTC),
        "exchange": d.exchange,
        "routing-keys": list(d.routing_keys),
    }
    if d.original_expiration is not None:
        table["original-expiration"] = d.original_expiration
    return table


def death_headers(deaths: Deaths, last_death: bool = True) -> dict[str, Any]:
    """`x-death`, `x-first-death-*` and `x-last-death-*` as AMQP 0-9-1 headers, in
    RabbitMQ's field types: texts are long strings, `count` a long-long, `time` a
    timestamp (whole seconds).

    `last_death` False leaves the `x-last-death-*` headers out, as releases before
    3.13 do (the release's `last_death_headers`)."""
    queue, reason, exchange = deaths.first
    headers: dict[str, Any] = {
        "x-first-death-queue": queue,
        "x-first-death-reason": reason,
        "x-first-death-exchange": exchange,
    }
    if last_death:
        last = deaths.last()
        headers.update({"x-last-death-queue": last.queue,
                        "x-last-death-reason": last.reason,
                        "x-last-death-exchange": last.exchange})
    headers["x-death"] = [_table(d) for d in deaths.records]
    return headers
