"""The client against the real machine through a one-member, in-order "Ra"."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from fifo import client
from fifo.client_effects import Out
from fifo.client_records import ClientState, init

from .helpers import N1, QNAME, Driver, ReadPlan, pid

S1 = ("q1", N1)
ME = pid(100)


class OneMemberRa:
    """Applies commands in arrival order with increasing indexes and turns the
    machine's ``ra_event`` sends and ``notify`` replies into client events."""

    def __init__(self, machine_version: int = 7) -> None:
        self.d = Driver(machine_version=machine_version)
        self.inbox: deque[tuple[Any, Any]] = deque()
        self.applied: list[tuple[int, Any]] = []

    def _machine_effects(self, effects: list[Any]) -> None:
        for e in effects:
            match e:
                case ("send_msg", to, msg, opts) if to == ME and "ra_event" in opts:
                    self.inbox.append((S1, ("machine", msg)))
                case ("log_ext", idxs, fun, ("local", _node)):
                    self._machine_effects(fun(ReadPlan(N1, self.d.log, idxs)))

    def perform(self, effect: Any) -> Any:
        match effect:
            case ("pipeline_command", _server, cmd, corr, _prio):
                mode = "noreply" if corr is None else ("notify", corr, ME)
                reply, effects = self.d.apply(cmd, reply_mode=mode)
                self._machine_effects(effects)
                if corr is not None:
                    self.applied.append((corr, reply))
            case ("process_command", _servers, cmd, _timeout):
                reply, effects = self.d.apply(cmd, reply_mode="await_consensus",
                                              **{"from": (ME, "ref")})
                self._machine_effects(effects)
                return ("ok", reply, S1)
            case ("exec_read", read_plan):
                return read_plan.execute()
            case ("send_after" | "cancel_timer", *_):
                return None
            case _:
                raise AssertionError(f"unexpected effect {effect!r}")
        return None

    def flush_applied(self) -> None:
        """Ra notifies a batch of applied correlations after the batch's effects."""
        if self.applied:
            self.inbox.append((S1, ("applied", self.applied)))
            self.applied = []


def drive(ra: OneMemberRa, op: Callable[[Sequence[Any]], Out]) -> Out:
    replies: list[Any] = []
    while True:
        out = op(replies)
        if out.tag != "call":
            for e in out.effects:
                ra.perform(e)
            return out
        *before, call = out.effects
        for e in before:
            ra.perform(e)
        replies = [*replies, ra.perform(call)]


@pytest.mark.parametrize("version", [7, 8])
def test_published_messages_reach_the_consumer_in_order_and_are_settled(version: int) -> None:
    """Machine 8 hands the session packed references, machine 7 ``(idx, header)``."""
    ra = OneMemberRa(version)
    s: ClientState = init([S1], ME, machine_version=version)
    actions: list[Any] = []

    out = drive(ra, lambda r: client.checkout("ctag", ("simple_prefetch", 5), {"ack": True},
                                              s, r))
    s = out.state
    assert s.consumers["ctag"].last_msg_id == -1

    # publish more than the soft limit before Ra gets to notify anything
    for n in range(1, 61):
        out = drive(ra, lambda r, n=n, s=s: client.enqueue(QNAME, n, b"msg-%d" % n, s, r))
        assert out.tag == "ok"
        s = out.state
        actions.extend(out.actions)
    assert actions == [("block", "q1")]
    assert s.slow and len(s.pending) == 60
    ra.flush_applied()

    bodies: list[bytes] = []
    while ra.inbox:
        server, evt = ra.inbox.popleft()
        out = drive(ra, lambda r, server=server, evt=evt, s=s: client.handle_ra_event(
            QNAME, server, evt, s, r))
        assert out.tag == "ok"
        s = out.state
        for a in out.actions:
            actions.append(a)
            if a[0] == "deliver":
                ids = [mid for _, _, mid, _, _ in a[3]]
                bodies.extend(m for _, _, _, _, m in a[3])
                out = client.settle("ctag", ids, s)
                for e in out.effects:
                    ra.perform(e)
                s = out.state
        ra.flush_applied()

    assert bodies == [b"msg-%d" % n for n in range(1, 61)]
    settled = [c for a in actions if a[0] == "settled" for c in a[2]]
    assert sorted(settled) == list(range(1, 61))
    assert ("unblock", "q1") in actions
    assert actions.index(("unblock", "q1")) > actions.index(("block", "q1"))
    assert (s.pending, s.slow, s.unsent_commands) == ({}, False, {})
    assert s.consumers["ctag"].last_msg_id == 59
    m = ra.d.state
    assert m.messages_total == 0
    assert m.consumers[s.consumers["ctag"].key].checked_out == {}
