"""Election timeout lengths and where they are armed (Ra's ``ra_server_proc`` election timers).

Ra runs no periodic heartbeat: an idle cluster is silent and followers only
arm an election timer when they have reason to suspect the leader. The
lengths are randomised to break symmetry; the random source is injected so
runs replay from a seed.
"""

from __future__ import annotations

import random

from ra.types import CANDIDATE, FOLLOWER, PRE_VOTE, RECOVERED

#: ``broadcast_time`` default (ms).
BROADCAST_TIME = 100
#: aten poll interval default (ms).
ATEN_POLL_INTERVAL = 1000
#: ``?DEFAULT_ELECTION_MULT``.
ELECTION_MULT = 5

REALLY_SHORT = "really_short"
SHORT = "short"
MEDIUM = "medium"
LONG = "long"


def election_timeout_ms(
    length: str,
    rng: random.Random,
    broadcast_time: int = BROADCAST_TIME,
    poll_interval: int = ATEN_POLL_INTERVAL,
) -> int:
    """Draw a timeout: ``rand:uniform(N)`` is uniform over ``1..N``."""
    if length == REALLY_SHORT:
        return rng.randint(1, broadcast_time)
    if length == SHORT:
        return rng.randint(1, broadcast_time * ELECTION_MULT) + broadcast_time
    if length == MEDIUM:
        return rng.randint(1, poll_interval) + broadcast_time
    if length == LONG:
        return rng.randint(1, broadcast_time * ELECTION_MULT * 2) + poll_interval
    raise ValueError(f"unknown election timeout length {length!r}")


def on_enter(state: str, old_state: str, log_is_new: bool) -> str | None:
    """Timeout length armed on entering `state`, or ``None``.

    A brand-new server (only the dummy entry, no snapshot) arms nothing: a
    new cluster is started explicitly with ``trigger_election``.
    """
    if state == FOLLOWER:
        if log_is_new:
            return None
        return SHORT if old_state == RECOVERED else LONG
    if state == PRE_VOTE:
        return LONG
    if state == CANDIDATE:
        return SHORT
    return None


def on_stay(state: str) -> str | None:
    """Length armed when an event leaves the server in the same state
    (only if no timer is pending)."""
    if state == PRE_VOTE:
        return LONG
    if state == CANDIDATE:
        return MEDIUM
    return None


def on_leader_down(reason: str) -> tuple[str, bool]:
    """Follower saw ``DOWN`` for its leader: ``(length, keep_leader_id)``."""
    if reason == "noconnection":
        return SHORT, True
    return REALLY_SHORT, False
