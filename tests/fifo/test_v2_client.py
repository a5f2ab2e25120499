"""A session with a machine 2 queue speaks RabbitMQ 3.10's ``rabbit_fifo_client``.

The same calls as against machine 7: a publish sends the ``enqueue`` record (3.10
has no compact ``e``), a consume sends ``{auto, N, simple_prefetch}`` and takes the
bare ``ok`` (the key is the consumer id, the first message id 0), a cancel that asks
to return the messages is a plain cancel, and ``basic.get`` always carries
``x-delivery-count`` (0 for a fresh message), as 3.10.8 answers.
"""

from __future__ import annotations

from typing import Any

from fifo import client
from fifo.client_effects import PipelineCommand, ProcessCommand
from fifo.client_records import ClientConsumer, ClientState, init
from fifo.commands import E, Enqueue, make_checkout
from fifo.mc import BasicMessage

from .helpers import N1, N2, QNAME, pid

S1 = ("q1", N1)
S2 = ("q1", N2)
ME = pid(100)
TIMEOUT = 65_000


def session(version: int) -> ClientState:
    s = init([S1, S2], ME, machine_version=version)
    s.queue_status = "go"
    s.leader = S1
    return s


def sent(out: Any) -> Any:
    [effect] = out.effects
    assert isinstance(effect, PipelineCommand | ProcessCommand)
    return effect.command


def test_a_publish_sends_the_enqueue_record() -> None:
    cmds = {v: sent(client.enqueue(QNAME, 1, b"m", session(v))) for v in (2, 7)}
    assert cmds[2] == Enqueue("enqueue", ME, 1, b"m")
    assert cmds[7] == E("e", 1, b"m", (0, 1))


def test_a_consume_sends_3_10s_spec_and_takes_a_bare_ok() -> None:
    specs = {v: sent(client.checkout("ct", ("simple_prefetch", 0), {"ack": True},
                                     session(v))).spec for v in (2, 7)}
    assert specs == {2: ("auto", 2000, "simple_prefetch"),
                     7: ("auto", ("simple_prefetch", 2000))}
    credited = client.checkout("cr", ("credited", 0), {}, session(2))
    assert sent(credited).spec == ("auto", 0, "credited")
    out = client.checkout("ct", ("simple_prefetch", 10), {"ack": False}, session(2),
                          [("ok", "ok", S2)])
    assert (out.tag, out.result, out.state.leader) == ("ok", {}, S2)
    assert out.state.consumers == {"ct": ClientConsumer(("ct", ME), -1, False)}


def test_a_cancel_that_would_return_the_messages_is_a_plain_cancel() -> None:
    calls = {}
    for v in (2, 7):
        s = session(v)
        s.consumers["ct"] = ClientConsumer(("ct", ME), 3, True)
        calls[v] = sent(client.cancel_checkout("ct", "remove", s))
    assert calls[2] == make_checkout(("ct", ME), "cancel", {})
    assert calls[7] == make_checkout(("ct", ME), "remove", {})


def test_a_get_always_carries_x_delivery_count() -> None:
    seen = {}
    for v in (2, 7):
        got = []
        for header in (1, {"size": 1, "delivery_count": 2}):
            reply = ("ok", ("dequeue", (0, (header, BasicMessage(b"m"))), 0), S1)
            out = client.dequeue(QNAME, "g", "settled", session(v), [reply])
            _ready, (_q, _ref, _id, redelivered, msg) = out.result
            got.append((redelivered, msg.annotations.get("x-delivery-count")))
        seen[v] = got
    assert seen[2] == [(False, 0), (True, 2)]
    assert seen[7] == [(False, None), (True, 2)]  # a v7 header without acquired_count
