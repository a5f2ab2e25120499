"""At-least-once dead lettering inside the machine and handler switches."""

from __future__ import annotations

from fifo import (
    make_checkout,
    make_discard,
    make_dlx_checkout,
    make_dlx_settle,
    make_purge,
    make_update_config,
)
from fifo.effects import SELF
from fifo.mc import BasicMessage
from fifo.msg import unpack

from .helpers import QNAME, Driver, pid

P1 = pid(1)
C1 = pid(10)
W1 = pid(20)
W2 = pid(21)
ALO = {"dead_letter_handler": "at_least_once", "overflow_strategy": "reject_publish"}


def rejected(n: int, **cfg) -> Driver:
    """`n` messages discarded by a consumer into the at-least-once dlx."""
    d = Driver(**{**ALO, **cfg})
    for i in range(1, n + 1):
        d.enqueue(P1, i, f"m{i}".encode())
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 10)), {}))
    d.apply(make_discard(n + 1, list(range(n))))
    return d


def test_discarded_messages_stay_in_the_queue_state() -> None:
    d = rejected(2)
    s = d.state
    assert [(r, unpack(m)) for r, m in s.dlx.discards] == [
        ("rejected", (1, {"size": 2, "acquired_count": 1, "delivery_count": 1})),
        ("rejected", (2, {"size": 2, "acquired_count": 1, "delivery_count": 1}))]
    assert (s.dlx.msg_bytes, s.messages_total) == (4, 0)
    assert d.machine.overview(s)["num_messages"] == 2
    assert d.machine.overview(s)["smallest_raft_index"] == 1


def test_worker_checkout_delivers_up_to_prefetch_through_a_log_effect() -> None:
    d = rejected(3)
    reply, effects = d.apply(make_dlx_checkout(W1, 2))
    assert reply == "ok"
    (kind, idxs, fun), = effects
    assert (kind, idxs) == ("log", [1, 2])
    sent = fun([d.log[1], d.log[2]], self_pid="leader")
    assert sent == [("send_msg", W1, ("dlx_event", "leader", ("dlx_delivery", [
        (0, ("rejected", b"m1")), (1, ("rejected", b"m2"))])), ["cast"])]
    assert fun([d.log[1], d.log[2]])[0][2][1] == SELF
    dlx = d.state.dlx
    assert (len(dlx.discards), sorted(dlx.consumer.checked_out)) == (1, [0, 1])
    assert (dlx.msg_bytes, dlx.msg_bytes_checkout) == (2, 4)


def test_settle_confirms_and_sends_more() -> None:
    d = rejected(3)
    d.apply(make_dlx_checkout(W1, 2))
    reply, effects = d.apply(make_dlx_settle([0, 7]))
    assert effects[0][0:2] == ("log", [3])
    assert effects[1] == ("mod_call", "rabbit_global_counters",
                          "messages_dead_lettered_confirmed",
                          ["rabbit_quorum_queue", "at_least_once", 1])
    assert d.state.dlx.ra_indexes.to_list() == [2, 3]


def test_new_worker_gets_in_flight_messages_again_in_order() -> None:
    d = rejected(3)
    d.apply(make_dlx_checkout(W1, 2))
    _, effects = d.apply(make_dlx_checkout(W2, 10))
    assert effects[0][0:2] == ("log", [1, 2, 3])
    con = d.state.dlx.consumer
    assert (con.pid, sorted(con.checked_out), con.next_msg_id) == (W2, [0, 1, 2], 3)


def test_dlx_commands_are_ignored_without_at_least_once() -> None:
    d = Driver()
    assert d.apply(make_dlx_checkout(W1, 2)) == ("ok", [])
    assert d.state.dlx.consumer is None


def test_dead_lettered_messages_count_towards_limits() -> None:
    d = rejected(2, max_length=1)  # nothing ready, but two dead-lettered
    assert d.state.enqueuers[P1].blocked == d.index  # blocked again by the discard
    d.apply(make_dlx_checkout(W1, 5))
    _, effects = d.apply(make_dlx_settle([0, 1]))  # confirmed: below the soft limit
    assert effects[-1] == ("send_msg", P1, ("queue_status", "go"), ["ra_event"])


def test_v7_purge_keeps_dead_lettered_messages() -> None:
    d = rejected(2)
    assert d.apply(make_purge())[0] == ("purge", 0)
    assert len(d.state.dlx.discards) == 2


def test_switching_away_drops_dead_lettered_messages() -> None:
    d = rejected(2)
    d.apply(make_dlx_checkout(W1, 1))
    _, effects = d.apply(make_update_config({"name": "q1", "dead_letter_handler": None}))
    assert effects[0][0:3] == ("mod_call", "logger", "debug")
    assert effects[1] == ("aux", ("dlx", "teardown", W1))
    assert effects[2] == ("mod_call", "logger", "info", [
        "Deleted ~b dead-lettered messages (with total messages size of ~b bytes) in ~ts",
        [2, 4, QNAME]])
    assert d.state.dlx.consumer is None and not d.state.dlx.discards


def test_a_partial_config_keeps_the_dlx_state_but_resets_the_handler() -> None:
    d = rejected(2)
    _, effects = d.apply(make_update_config({"name": "q1"}))
    assert effects == []
    assert len(d.state.dlx.discards) == 2 and d.state.cfg.dead_letter_handler is None


def test_switching_to_at_least_once_sets_up_the_worker() -> None:
    d = Driver()
    _, effects = d.apply(make_update_config({"name": "q1", **ALO}))
    assert effects[-1] == ("aux", ("dlx", "setup"))


def test_same_handler_asks_the_worker_to_reread_topology() -> None:
    d = rejected(1)
    d.apply(make_dlx_checkout(W1, 1))
    _, effects = d.apply(make_update_config({"name": "q1", **ALO}))
    assert effects == [("send_msg", W1, ("dlx_event", SELF, "lookup_topology"), "cast")]


def test_expired_and_delivery_limit_reasons() -> None:
    d = Driver(**ALO, delivery_limit=0)
    d.enqueue(P1, 1, BasicMessage(b"a", ttl=5), ts=1000)
    d.apply(("timeout", "expire_msgs"), ts=2000)
    d.enqueue(P1, 2, b"b")
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 1)), {}))
    d.apply(("return", 4, [0]))
    assert [r for r, _ in d.state.dlx.discards] == ["expired", "delivery_limit"]
