"""Replica history rows of the queue machine, as the history schema names them.

`QueueMachine` is driven directly (no Ra server) on a node named ``n2@host``: every
apply gives one ``applied`` row with the command's digest and a state digest, an
enqueue carries the workload's message id (header ``x-warren-id``), a checkout that
hands out a message gives a ``service_queue`` row, and executing the local send gives
the matching ``local_delivery`` row.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node, trace
from fifo import replica_trace
from fifo.commands import make_checkout, make_enqueue, make_return, make_settle
from fifo.mc import BasicMessage
from fifo.ra_glue import QueueMachine, machine_config
from fifo.replica_trace import canonical, cmd_type, digest, replica_view
from ra import machine as ra_machine
from ra.types import USR
from tests.fifo.helpers import QNAME

Row = tuple[str, dict[str, Any]]


@pytest.fixture
def rows() -> Iterator[list[Row]]:
    seen: list[Row] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    every = replica_trace.set_digest_every(1)
    node = Node("n2@host").start()
    try:
        with node.attached():
            yield seen
    finally:
        node.stop()
        trace.set_sink(previous)
        replica_trace.set_digest_every(every)
        replica_trace.forget()


def meta(index: int) -> dict[str, Any]:
    return {"index": index, "term": 3, "system_time": 1000, "machine_version": 7}


def message(msg_id: int) -> BasicMessage:
    return BasicMessage(b"body", annotations={"x-warren-id": str(msg_id).encode()})


class Plan:
    """A Ra read plan over the commands the test applied."""

    def __init__(self, log: dict[int, Any]) -> None:
        self.log = log

    def read(self) -> dict[int, Any]:
        return {i: (USR, {}, cmd, "none") for i, cmd in self.log.items()}


def local_sends(effects: list[Any], log: dict[int, Any]) -> list[Any]:
    """Run the ``local`` delivery effects the way the consumer's member does."""
    out = []
    for eff in effects:
        if eff[0] == "log_ext":
            out.extend(eff[2](Plan(log)))
    return out


def test_applies_decisions_and_the_local_send_are_recorded_with_the_schema_fields(
        rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    s = m.init({})
    consumer = actors.self()
    checkout = make_checkout(("ctag-1", consumer), ("auto", ("simple_prefetch", 5)),
                             {"ack": True, "args": [("x-warren-consumer", "c1.1/1")]})
    enqueue = make_enqueue(None, None, message(42))
    s, _reply, _fx = m.apply(meta(1), checkout, s)
    s, _reply, effects = m.apply(meta(2), enqueue, s)
    sends = local_sends(effects, {2: enqueue})

    assert [k for k, _ in rows] == ["applied", "applied", "service_queue", "local_delivery"]
    server = {"queue": "q1", "server": "q1@n2", "node": "n2@host", "emitter": "n2@host/ra/q1",
              "role": None}
    assert rows[0][1] == {**server, "raft_term": 3, "raft_index": 1, "cmd_type": "checkout",
                          "cmd_digest": digest(checkout), "msg_id": None,
                          "ready": 0, "checked_out": 0,
                          "state_digest": rows[0][1]["state_digest"]}
    assert rows[1][1] == {**server, "raft_term": 3, "raft_index": 2, "cmd_type": "enqueue",
                          "cmd_digest": digest(enqueue), "msg_id": 42,
                          "ready": 0, "checked_out": 1,
                          "state_digest": digest(replica_view(s))}
    assert rows[2][1] == {**server, "raft_term": 3, "raft_index": 2, "msg_id": 42,
                          "consumer_key": "c1.1/1/ctag-1", "consumer_node": "n2",
                          "attempt": 0, "delivery_id": 0}
    assert rows[3][1] == {**server, "raft_index": 2, "msg_id": 42,
                          "consumer_key": "c1.1/1/ctag-1", "consumer_node": "n2",
                          "attempt": 0, "to": consumer, "tag": "ctag-1", "delivery_id": 0,
                          "delivery_ids": [0]}
    assert [eff[2][0] for eff in sends] == ["delivery"]


def returned_once(m: QueueMachine) -> tuple[Any, Any]:
    """Message 7 enqueued at index 1, handed to consumer ``t`` at 2 (delivery id 0),
    returned at 3 and handed out again there (delivery id 1); the state and the key."""
    s = m.init({})
    s, _r, _fx = m.apply(meta(1), make_enqueue(None, None, message(7)), s)
    s, _r, _fx = m.apply(meta(2), make_checkout(("t", actors.self()),
                                                ("auto", ("simple_prefetch", 1)),
                                                {"ack": True}), s)
    key = next(iter(s.consumers))
    s, _r, _fx = m.apply(meta(3), make_return(key, [0]), s)
    return s, key


def test_a_returned_message_is_decided_again_with_the_next_attempt(rows: list[Row]) -> None:
    me = actors.self()
    returned_once(QueueMachine(machine_config("q1", QNAME)))

    decided = [(f["raft_index"], f["msg_id"], f["attempt"], f["delivery_id"], f["consumer_key"])
               for k, f in rows if k == "service_queue"]
    assert decided == [(2, 7, 0, 0, f"{me!r}//t"), (3, 7, 1, 1, f"{me!r}//t")]
    assert [f["cmd_type"] for k, f in rows if k == "applied"] == ["enqueue", "checkout",
                                                                  "return"]


def test_a_settle_records_each_message_it_took_from_its_consumer(rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    s = m.init({})
    me = actors.self()
    s, _r, _fx = m.apply(meta(1), make_checkout(("t", me), ("auto", ("simple_prefetch", 5)),
                                                {"ack": True}), s)
    for i, msg_id in enumerate((7, 8, 9), start=2):
        s, _r, _fx = m.apply(meta(i), make_enqueue(None, None, message(msg_id)), s)
    key = next(iter(s.consumers))
    # delivery ids 0 and 2 (messages 7 and 9); 5 was never handed out
    s, _r, _fx = m.apply(meta(5), make_settle(key, [0, 2, 5]), s)
    # settling 0 again takes nothing: no row
    s, _r, _fx = m.apply(meta(6), make_settle(key, [0]), s)

    settled = [(f["raft_index"], f["msg_id"], f["delivery_id"], f["consumer_key"])
               for k, f in rows if k == "settled"]
    assert settled == [(5, 7, 0, f"{me!r}//t"), (5, 9, 2, f"{me!r}//t")]
    assert [f["cmd_type"] for k, f in rows if k == "applied"][-2:] == ["settle", "settle"]


def test_a_returned_message_is_not_settled(rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    s, key = returned_once(m)
    # delivery id 0 went back to the queue; the settle names what the consumer no longer has
    s, _r, _fx = m.apply(meta(4), make_settle(key, [0]), s)
    assert [f for k, f in rows if k == "settled"] == []
    s, _r, _fx = m.apply(meta(5), make_settle(key, [1]), s)
    assert [(f["raft_index"], f["msg_id"]) for k, f in rows if k == "settled"] == [(5, 7)]


def test_state_digests_are_taken_every_k_indexes(rows: list[Row]) -> None:
    replica_trace.set_digest_every(2)
    m = QueueMachine(machine_config("q1", QNAME))
    s = m.init({})
    for i in range(1, 5):
        s, _r, _fx = m.apply(meta(i), make_enqueue(None, None, message(i)), s)
    assert [("state_digest" in f) for k, f in rows if k == "applied"] == [False, True,
                                                                           False, True]


def test_state_enter_records_the_role_and_nothing_is_recorded_without_a_sink(
        rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    s = m.init({})
    ra_machine.call_state_enter(m, "follower", s)
    assert rows == [("role_change", {"queue": "q1", "server": "q1@n2", "node": "n2@host",
                                     "emitter": "n2@host/ra/q1", "role": "follower",
                                     "raft_term": None, "leader": None, "previous": None})]
    trace.set_sink(None)
    m.apply(meta(1), make_enqueue(None, None, message(1)), s)
    assert len(rows) == 1


def test_digests_depend_on_values_only() -> None:
    assert canonical({"b": 1, "a": (b"x", [None, True])}) == \
        canonical({"a": (b"x", [None, True]), "b": 1})
    assert canonical((1, 2)) != canonical([1, 2])
    assert canonical("1") != canonical(1)
    # a fixed value: the encoding and hash must not change between processes or runs
    assert digest(("e", 1, b"m")) == digest(("e", 1, b"m")) == -1_605_966_023_010_534_673
    # index sequences (arrays) are one block of 64-bit little-endian integers, on any
    # machine, and never equal to the list of the same numbers
    block = b"".join(i.to_bytes(8, "little", signed=True) for i in (1, -2))
    assert canonical(array("q", [1, -2])) == b"aq16:" + block
    assert canonical(array("q", [1, 2])) != canonical([1, 2])
    assert cmd_type(("e", 1, b"m", (0, 1))) == "enqueue"
    assert cmd_type(("dlx", ("settle", [1]))) == "dlx_settle"
    assert cmd_type(("down", "pid", "noconnection")) == "down"


@pytest.mark.parametrize(("version", "attempt"), [(7, 1), (8, 0)])
def test_a_decision_s_attempt_is_what_that_release_s_consumer_sees(
        rows: list[Row], version: int, attempt: int) -> None:
    """`attempt` is the `x-delivery-count` the consumer is given: a requeue counts in
    machine 7 (RabbitMQ 4.0-4.2), not in machine 8 (4.3, failed deliveries only), so the
    client's rows and the replicas' match under either release."""
    m = QueueMachine(machine_config("q1", QNAME), version)
    s = m.init({})

    def at(index: int) -> dict[str, Any]:
        return {**meta(index), "machine_version": version}

    s, _r, _fx = m.apply(at(1), make_enqueue(None, None, message(7)), s)
    s, _r, _fx = m.apply(at(2), make_checkout(("t", actors.self()),
                                              ("auto", ("simple_prefetch", 1)), {"ack": True}), s)
    s, _r, _fx = m.apply(at(3), make_return(next(iter(s.consumers)), [0]), s)
    assert [f["attempt"] for k, f in rows if k == "service_queue"] == [0, attempt]
