"""credit_flow as RabbitMQ has it, as a pure object owned by one actor.

RabbitMQ keeps this bookkeeping in the process dictionary of every process that
takes part (reader, channel, classic queue). warren keeps it in one
`CreditFlow` per actor. Operations never send anything themselves: they return
the `bump_credit` grants the owner must send, so the accounting can be tested
as exact tables and the actor stays the only place with side effects. Time is
passed in (monotonic microseconds) for the "flow" state report.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from actors.wire import frozen_init

__all__ = [
    "DEFAULT_CREDIT",
    "FLOW_REPORT_WINDOW_US",
    "BlockedTime",
    "CreditFlow",
    "Grant",
    "bump_msg",
    "validate_credit",
]

DEFAULT_CREDIT: tuple[int, int] = (400, 200)
"""`credit_flow_default_credit`: (InitialCredit, MoreCreditAfter)."""

FLOW_REPORT_WINDOW_US = 1_000_000
"""A process blocked within this many microseconds still reports `flow`."""


@dataclass
class BlockedTime:
    """How long a sender has spent blocked by credit flow, its stretches added up.

    RabbitMQ keeps no such total (a connection only reports `flow` while blocked);
    warren's metrics show it. The owner tells it, with the time, whether the sender
    is blocked after each change of its credit."""

    done_ms: int = 0
    since_ms: int | None = None

    def observe(self, blocked: bool, now_ms: int) -> None:
        if blocked and self.since_ms is None:
            self.since_ms = now_ms
        elif not blocked and self.since_ms is not None:
            self.done_ms += now_ms - self.since_ms
            self.since_ms = None

    def total(self, now_ms: int) -> int:
        """The blocked time so far, an open stretch counted up to `now_ms`."""
        return self.done_ms + (0 if self.since_ms is None else now_ms - self.since_ms)


@frozen_init
@dataclass(frozen=True, slots=True)
class Grant:
    """A grant to send: `to ! {bump_credit, {From, Quantity}}`."""

    to: Any
    sender: Any
    quantity: int

    def message(self) -> tuple[str, tuple[Any, int]]:
        return bump_msg(self.sender, self.quantity)


def bump_msg(sender: Any, quantity: int) -> tuple[str, tuple[Any, int]]:
    """The message shape a receiver sends to grant more credit."""
    return ("bump_credit", (sender, quantity))


def validate_credit(value: Any) -> tuple[int, int]:
    """Boot-time check of a configured (Initial, MoreAfter) pair."""
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        or value[1] > value[0]
    ):
        raise ValueError(f"invalid credit_flow_default_credit: {value!r}")
    return value


@dataclass
class CreditFlow:
    """The credit bookkeeping of one actor (`me`), towards all its peers."""

    me: Any
    initial: int = DEFAULT_CREDIT[0]
    more_after: int = DEFAULT_CREDIT[1]
    credit_from: dict[Any, int] = field(default_factory=dict)
    credit_to: dict[Any, int] = field(default_factory=dict)
    credit_blocked: list[Hashable] = field(default_factory=list)
    blocked_at_us: int | None = None
    deferred: list[Grant] = field(default_factory=list)

    # ------------------------------------------------------------ sender side

    def send(self, to: Any, now_us: int) -> None:
        """Spend one credit towards `to`; only the 1 -> 0 step blocks."""
        credit = self.credit_from.get(to, self.initial)
        if credit == 1:
            self.block(to, now_us)
            self.credit_from[to] = 0
        else:
            self.credit_from[to] = credit - 1

    def handle_bump_msg(self, msg: tuple[Any, int]) -> list[Grant]:
        """Credit granted by `sender`; unblocks on the step from <= 0 to > 0."""
        sender, quantity = msg
        credit = self.credit_from.get(sender, 0)
        released: list[Grant] = []
        if credit <= 0 and credit + quantity > 0:
            released = self.unblock(sender)
        self.credit_from[sender] = credit + quantity
        return released

    # ---------------------------------------------------------- receiver side

    def ack(self, to: Any) -> list[Grant]:
        """One message from `to` consumed; every `more_after`-th grants more."""
        credit = self.credit_to.get(to, self.more_after)
        if credit == 1:
            self.credit_to[to] = self.more_after
            return self._grant(to, self.more_after)
        self.credit_to[to] = credit - 1
        return []

    def _grant(self, to: Any, quantity: int) -> list[Grant]:
        grant = Grant(to, self.me, quantity)
        if self.blocked():
            self.deferred.append(grant)
            return []
        return [grant]

    # ---------------------------------------------------------------- blocking

    def block(self, key: Hashable, now_us: int) -> None:
        if not self.credit_blocked:
            self.blocked_at_us = now_us
        self.credit_blocked.append(key)

    def unblock(self, key: Hashable) -> list[Grant]:
        """Drop one occurrence of `key`; when nothing blocks, release deferred grants."""
        try:
            self.credit_blocked.remove(key)
        except ValueError:
            pass
        if self.credit_blocked:
            return []
        released, self.deferred = self.deferred, []
        return released

    def blocked(self) -> bool:
        return bool(self.credit_blocked)

    def state(self, now_us: int) -> str:
        """`flow` while blocked or blocked less than a second ago, else `running`."""
        if self.blocked():
            return "flow"
        if self.blocked_at_us is not None and now_us - self.blocked_at_us < FLOW_REPORT_WINDOW_US:
            return "flow"
        return "running"

    def peer_down(self, peer: Any) -> list[Grant]:
        """Forget a dead peer; deferred grants to it are kept (sent into the void)."""
        released = self.unblock(peer)
        self.credit_from.pop(peer, None)
        self.credit_to.pop(peer, None)
        return released
