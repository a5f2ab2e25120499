"""Restart intensity: OTP's whole-second bookkeeping, as a pure function.

`supervisor.erl` records each restart as `erlang:monotonic_time(1)` — the
monotonic clock truncated to whole seconds — and keeps every record not older
than ``now - period``. Because of the truncation the real window is between
`period` and `period + 1` seconds (restarts at 0.1 s and 5.9 s are 5 apart in
buckets and both kept; 0.9 s and 6.0 s are 6 apart and not). Fault tests with
tight timings only match Erlang if this bucketing is reproduced exactly, so it
is kept here, away from any process code, and tested on exact instants.
"""

from __future__ import annotations

import math

__all__ = ["add_restart", "bucket"]


def bucket(monotonic_seconds: float) -> int:
    """Erlang's ``monotonic_time(second)``: floor, also for negative times."""
    return math.floor(monotonic_seconds)


def add_restart(
    restarts: list[int], now: int, period: int, intensity: int
) -> tuple[list[int], bool]:
    """Record a restart at bucket `now`.

    `restarts` is newest first. Returns the kept list (newest first, `now`
    prepended) and whether the supervisor must give up: more than `intensity`
    restarts within the window. A record exactly `period` buckets old is kept.
    """
    threshold = now - period
    kept = [now]
    for r in restarts:
        if r < threshold:
            break  # newest first: everything after is older still
        kept.append(r)
    return kept, len(kept) > intensity
