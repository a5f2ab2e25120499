"""The order in which a channel's quorum-queue commands leave it, as `rabbit_fifo_client`.

The owner of a session (a channel) performs every Ra send itself, in the order
its client operations produced them, and every one goes to the leader the
session knows: publishes as low-priority pipelined enqueues, acks and
rejections without requeue as normal-priority pipelined commands, requeues as
casts to the leader's aux handler on machine 7 (which appends them at once) and
as normal-priority pipelined commands from machine 8, and ``basic.get`` as a
synchronous command. So a ``basic.get`` sent after a
requeue reaches the leader after it; only Ra's own low-priority queue lets
the get overtake an enqueue.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import client, client_owner
from fifo.client_records import ClientConsumer, ClientState, init
from fifo.commands import (
    make_checkout,
    make_discard,
    make_enqueue,
    make_return,
    make_settle,
)

from .helpers import N1, N2, QNAME, pid

S1 = ("q1", N1)
S2 = ("q1", N2)
ME = pid(100)


class RecordingApi:
    """Stands in for `ra.api`: records each send; synchronous commands answer `reply`."""

    def __init__(self, reply: Any) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.reply = reply

    def pipeline_command(self, server: Any, cmd: Any, corr: Any, prio: str) -> str:
        self.sent.append(("pipeline_command", server, cmd, prio))
        return "ok"

    def cast_aux_command(self, server: Any, cmd: Any) -> str:
        self.sent.append(("cast_aux_command", server, cmd))
        return "ok"

    def process_command(self, servers: list[Any], cmd: Any, timeout: int) -> Any:
        self.sent.append(("process_command", servers[0], cmd))
        return self.reply


@pytest.fixture
def ra(monkeypatch: pytest.MonkeyPatch) -> RecordingApi:
    rec = RecordingApi(("ok", ("dequeue", "empty"), S2))
    monkeypatch.setattr(client_owner, "api", rec)
    return rec


def session(machine_version: int) -> ClientState:
    """Registered as an enqueuer, leader S2 (not the first server), one consumer."""
    s = init([S1, S2], ME, machine_version=machine_version)
    s.queue_status = "go"
    s.leader = S2
    s.consumers["ctag"] = ClientConsumer(3, 0)
    return s


@pytest.mark.parametrize("machine_version", [7, 8])
def test_a_channels_commands_leave_in_order_for_the_leader(ra: RecordingApi,
                                                           machine_version: int) -> None:
    timers: dict[str, Any] = {}
    s = session(machine_version)
    steps = [
        lambda s, r: client.enqueue(QNAME, 1, b"m1", s, r),      # basic.publish
        lambda s, r: client.return_("ctag", [0], s),             # basic.reject(requeue)
        lambda s, r: client.dequeue(QNAME, 7, "unsettled", s, r),  # basic.get
        lambda s, r: client.settle("ctag", [1], s),              # basic.ack
        lambda s, r: client.discard("ctag", [2], s),             # basic.reject
        lambda s, r: client.enqueue(QNAME, 2, b"m2", s, r),      # basic.publish
    ]
    for step in steps:
        out = client_owner.drive(lambda r, step=step, s=s: step(s, r), timers)
        assert out.tag in ("ok", "empty")
        s = out.state
    assert ra.sent == [
        ("pipeline_command", S2, make_enqueue(ME, 1, b"m1"), "low"),
        ("cast_aux_command", S2, (make_return(3, [0]), 1, ME)) if machine_version == 7
        else ("pipeline_command", S2, make_return(3, [0]), "normal"),
        ("process_command", S2, make_checkout((7, ME), ("dequeue", "unsettled"), {})),
        ("pipeline_command", S2, make_settle(3, [1]), "normal"),
        ("pipeline_command", S2, make_discard(3, [2]), "normal"),
        ("pipeline_command", S2, make_enqueue(ME, 2, b"m2"), "low"),
    ]


@pytest.mark.parametrize("machine_version", [7, 8])
def test_a_get_follows_a_requeue_of_a_message_it_got(ra: RecordingApi,
                                                     machine_version: int) -> None:
    """``basic.get`` without auto-ack, then ``basic.reject(requeue)`` of it, then
    ``basic.get``: the requeue is addressed to the one-shot consumer of the first
    get (its delivery tag) and sent before the second get."""
    ra.reply = ("ok", ("dequeue", (0, ({"size": 1}, b"m")), 0), S2)
    timers: dict[str, Any] = {}
    s = session(machine_version)
    out = client_owner.drive(lambda r: client.dequeue(QNAME, 1, "unsettled", s, r), timers)
    assert out.tag == "ok"
    out = client_owner.drive(lambda r: client.return_(1, [0], out.state), timers)
    out = client_owner.drive(lambda r: client.dequeue(QNAME, 2, "unsettled", out.state, r),
                             timers)
    if machine_version == 7:
        assert [(kind, server) for kind, server, *_ in ra.sent] == [
            ("process_command", S2), ("cast_aux_command", S2), ("process_command", S2)]
        assert ra.sent[1][2] == (make_return((1, ME), [0]), 0, ME)
    else:
        assert [(kind, server) for kind, server, *_ in ra.sent] == [
            ("process_command", S2), ("pipeline_command", S2), ("process_command", S2)]
        assert ra.sent[1][2:] == (make_return((1, ME), [0]), "normal")
