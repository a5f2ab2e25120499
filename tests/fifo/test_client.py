"""``rabbit_fifo_client``: publisher flow, confirms, leader tracking, deliveries."""

from __future__ import annotations

from typing import Any

import pytest

from fifo import client
from fifo.client_effects import (
    AuxCommand,
    CancelTimer,
    CastAuxCommand,
    ClientExit,
    FindLeader,
    Members,
    Out,
    PipelineCommand,
    ProcessCommand,
    SendAfter,
)
from fifo.client_records import ClientConsumer, ClientState, init
from fifo.commands import (
    make_checkout,
    make_credit,
    make_discard,
    make_enqueue,
    make_modify,
    make_register_enqueuer,
    make_return,
    make_settle,
)
from fifo.mc import BasicMessage

from .helpers import N1, N2, QNAME, pid

S1 = ("q1", N1)
S2 = ("q1", N2)
S3 = ("q1", "n3@host")
ME = pid(100)
TIMEOUT = 65_000


def pipe(server: Any, cmd: Any, seq: int | None, prio: str = "low") -> PipelineCommand:
    return PipelineCommand("pipeline_command", server, cmd, seq, prio)


def fresh(**kw: Any) -> ClientState:
    return init([S1, S2, S3], ME, **kw)


def registered(**kw: Any) -> ClientState:
    """A session whose first publish registered it with leader S1, nothing pending."""
    s = fresh(**kw)
    s.queue_status = "go"
    s.leader = S1
    return s


def publish(s: ClientState, n: int, first_corr: int = 1) -> tuple[ClientState, list[Out]]:
    outs = []
    for i in range(n):
        out = client.enqueue(QNAME, first_corr + i, b"m%d" % (first_corr + i), s)
        assert out.tag == "ok"
        outs.append(out)
        s = out.state
    return s, outs


# --- publishing ----------------------------------------------------------------


def test_init_uses_upstream_defaults() -> None:
    s = fresh()
    assert (s.leader, s.queue_status, s.next_seq, s.next_enqueue_seq, s.slow) == (
        None, None, 0, 1, False)
    assert (s.pending, s.unsent_commands, s.consumers) == ({}, {}, {})
    assert (s.cfg.soft_limit, s.cfg.timeout, s.cfg.servers) == (32, TIMEOUT, (S1, S2, S3))


def test_operations_work_on_a_copy_that_carries_every_field() -> None:
    """Each operation copies the session first: the copy equals it field for field
    and owns its maps, so the caller's state is never changed behind its back."""
    from fifo.client_records import copy_state

    s = registered()
    s.next_seq, s.next_enqueue_seq, s.slow, s.timer_state = 7, 5, True, "slow"
    s.cached_segments = ("seg", 1)
    s.pending[6] = ("corr", "cmd")
    s.consumers["ctag"] = ClientConsumer(("ctag", ME), 3)
    s.unsent_commands[("ctag", ME)] = ([1], [2], [3])
    c = copy_state(s)
    assert c == s
    c.pending.clear()
    c.consumers.clear()
    c.unsent_commands[("ctag", ME)][0].append(9)
    assert s.pending == {6: ("corr", "cmd")} and "ctag" in s.consumers
    assert s.unsent_commands[("ctag", ME)] == ([1], [2], [3])


def test_first_publish_registers_the_enqueuer_synchronously() -> None:
    s0 = fresh()
    reg = ProcessCommand("process_command", (S1, S2, S3), make_register_enqueuer(ME), TIMEOUT)
    out = client.enqueue(QNAME, "c1", b"hello", s0)
    assert out == Out("call", s0, [], [reg])
    out = client.enqueue(QNAME, "c1", b"hello", s0, [("ok", "ok", S2)])
    cmd = make_enqueue(ME, 1, b"hello")
    assert cmd == ("e", 1, b"hello", (0, 5))
    assert (out.tag, out.actions, out.effects) == ("ok", [], [pipe(S2, cmd, 0)])
    s = out.state
    assert (s.leader, s.queue_status, s.next_seq, s.next_enqueue_seq, s.slow) == (
        S2, "go", 1, 2, False)
    assert s.pending == {0: ("c1", cmd)}
    # the input state is a value: untouched
    assert s0.pending == {} and s0.queue_status is None


def test_registration_reject_publish_is_remembered() -> None:
    out = client.enqueue(QNAME, 1, b"x", fresh(), [("ok", "reject_publish", S1)])
    assert (out.tag, out.effects) == ("reject_publish", [])
    assert (out.state.queue_status, out.state.leader) == ("reject_publish", S1)
    again = client.enqueue(QNAME, 2, b"y", out.state)
    assert (again.tag, again.effects, again.state.pending) == ("reject_publish", [], {})


@pytest.mark.parametrize("reply", [("error", ("no_more_servers_to_try", [])),
                                   ("error", ("shutdown", "delete")),
                                   ("timeout", S1)])
def test_registration_failures_reject_and_retry_next_time(reply: Any) -> None:
    s0 = fresh()
    out = client.enqueue(QNAME, 1, b"x", s0, [reply])
    assert (out.tag, out.state, out.effects) == ("reject_publish", s0, [])
    assert client.enqueue(QNAME, 1, b"x", out.state).tag == "call"


def test_unexpected_registration_error_crashes_the_owner() -> None:
    with pytest.raises(ClientExit) as exc:
        client.enqueue(QNAME, 1, b"x", fresh(), [("error", "noproc")])
    assert exc.value.reason == ("error", "noproc")


def test_queue_status_events_switch_publishing() -> None:
    s = registered()
    out = client.handle_ra_event(QNAME, S1, ("machine", ("queue_status", "reject_publish")), s)
    assert out.state.queue_status == "reject_publish"
    assert client.enqueue(QNAME, 1, b"x", out.state).tag == "reject_publish"
    out = client.handle_ra_event(QNAME, S1, ("machine", ("queue_status", "go")), out.state)
    assert client.enqueue(QNAME, 1, b"x", out.state).tag == "ok"


def test_untracked_enqueue_goes_to_first_server_without_correlation() -> None:
    assert client.untracked_enqueue([S2, S1], b"x") == [
        pipe(S2, ("enqueue", None, None, b"x"), None)]


def test_soft_limit_blocks_on_the_33rd_pending_command() -> None:
    s, outs = publish(registered(), 32)
    assert [o.actions for o in outs] == [[]] * 32
    assert (len(s.pending), s.slow) == (32, False)
    assert [o.effects[0].correlation for o in outs] == list(range(32))
    assert [o.effects[0].command[1] for o in outs] == list(range(1, 33))
    out = client.enqueue(QNAME, 33, b"m33", s)
    timer = SendAfter("send_after", "slow", 10_000,
                      ("$gen_cast", ("queue_event", QNAME, (S1, "timeout"))))
    assert out.actions == [("block", "q1")]
    assert out.effects == [pipe(S1, make_enqueue(ME, 33, b"m33"), 32), timer]
    assert (len(out.state.pending), out.state.slow, out.state.timer_state) == (33, True, "slow")
    # already slow: no second block
    out2 = client.enqueue(QNAME, 34, b"m34", out.state)
    assert (out2.actions, len(out2.effects), out2.state.slow) == ([], 1, True)


def test_unblock_when_pending_drops_below_the_soft_limit() -> None:
    s, _ = publish(registered(), 33)
    assert s.slow
    out = client.handle_ra_event(QNAME, S1, ("applied", [(0, "ok")]), s)
    assert (out.actions, out.effects) == ([("settled", QNAME, [1])], [])
    assert (len(out.state.pending), out.state.slow) == (32, True)
    out = client.handle_ra_event(QNAME, S1, ("applied", [(1, "ok")]), out.state)
    assert out.actions == [("unblock", "q1"), ("settled", QNAME, [2])]
    assert out.effects == [CancelTimer("cancel_timer", "slow")]
    assert (len(out.state.pending), out.state.slow, out.state.timer_state) == (31, False, None)


@pytest.mark.parametrize("machine_version", [7, 8])
def test_settlements_are_stashed_while_slow_and_flushed_on_unblock(machine_version: int) -> None:
    s, _ = publish(registered(machine_version=machine_version), 33)
    s.consumers["ctag"] = ClientConsumer(key=7, last_msg_id=9, ack=True)
    for op, ids in ((client.settle, [1]), (client.return_, [2]), (client.settle, [3]),
                    (client.discard, [4]), (client.return_, [5]), (client.discard, [6])):
        out = op("ctag", ids, s)
        assert (out.actions, out.effects) == ([], [])
        s = out.state
    assert s.unsent_commands == {7: ([3, 1], [2, 5], [4, 6])}
    assert len(s.pending) == 33 and s.next_seq == 33
    out = client.handle_ra_event(QNAME, S1, ("applied", [(0, "ok"), (1, "ok")]), s)
    assert out.actions == [("unblock", "q1"), ("settled", QNAME, [2, 1])]
    # a v7 machine takes returns through the leader's aux handler, v8 as a command
    returned = (CastAuxCommand("cast_aux_command", S1, (make_return(7, [2, 5]), 34, ME))
                if machine_version == 7 else pipe(S1, make_return(7, [2, 5]), 34, "normal"))
    assert out.effects == [
        CancelTimer("cancel_timer", "slow"),
        pipe(S1, make_settle(7, [3, 1]), 33, "normal"),
        returned,
        pipe(S1, make_discard(7, [4, 6]), 35, "normal"),
    ]
    assert out.state.unsent_commands == {}
    assert sorted(out.state.pending) == list(range(2, 36))


# --- applied -----------------------------------------------------------------------------


def test_applied_batch_settles_correlations_and_keeps_not_enqueued() -> None:
    s, _ = publish(registered(), 4)
    evt = ("applied", [(0, "ok"), (2, "not_enqueued"), (1, "ok"), (99, "ok"),
                       (3, ("multi", [("send_credit_reply", 3), "ok",
                                      ("send_drained", ("t", 2))]))])
    out = client.handle_ra_event(QNAME, S1, evt, s)
    assert out.actions == [("settled", QNAME, [4, 2, 1]), ("send_credit_reply", 3),
                           ("credit_reply_v1", "t", 2, 0, True)]
    assert out.effects == []
    assert list(out.state.pending) == [2]


def test_applied_with_nothing_correlated_has_no_settled_action() -> None:
    s = registered()
    out = client.settle("ctag", [0], s)
    out = client.handle_ra_event(QNAME, S1, ("applied", [(0, "ok")]), out.state)
    assert (out.actions, out.effects, out.state.pending) == ([], [], {})


def test_applied_from_another_server_checks_members_then_resends() -> None:
    s, _ = publish(registered(), 3)
    evt = ("applied", [(0, "ok")])
    out = client.handle_ra_event(QNAME, S2, evt, s)
    assert out == Out("call", s, [], [Members("members", S2)])
    out = client.handle_ra_event(QNAME, S2, evt, s, [("ok", [S1, S2, S3], S2)])
    assert out.state.leader == S2
    assert out.effects == [pipe(S2, make_enqueue(ME, 2, b"m2"), 3),
                           pipe(S2, make_enqueue(ME, 3, b"m3"), 4)]
    assert out.actions == [("settled", QNAME, [1])]
    # members says the old leader is still leader: no resend
    out = client.handle_ra_event(QNAME, S2, evt, s, [("ok", [S1, S2, S3], S1)])
    assert (out.effects, out.state.leader, sorted(out.state.pending)) == ([], S2, [1, 2])


# --- leader tracking and resends -------------------------------------------------------


def test_leader_change_resends_all_pending_in_order() -> None:
    s, _ = publish(registered(), 3)
    s2 = client.settle("ctag", [5], s).state  # a settle in between is resent too
    s3, _ = publish(s2, 1, first_corr=4)
    assert sorted(s3.pending) == [0, 1, 2, 3, 4]
    out = client.handle_ra_event(QNAME, S3, ("machine", "leader_change"), s3)
    assert out.state.leader == S3
    assert out.effects == [
        pipe(S3, make_enqueue(ME, 1, b"m1"), 5),
        pipe(S3, make_enqueue(ME, 2, b"m2"), 6),
        pipe(S3, make_enqueue(ME, 3, b"m3"), 7),
        pipe(S3, make_settle(("ctag", ME), [5]), 8),
        pipe(S3, make_enqueue(ME, 4, b"m4"), 9),
    ]
    assert out.state.pending == {5: (1, make_enqueue(ME, 1, b"m1")),
                                 6: (2, make_enqueue(ME, 2, b"m2")),
                                 7: (3, make_enqueue(ME, 3, b"m3")),
                                 8: (None, make_settle(("ctag", ME), [5])),
                                 9: (4, make_enqueue(ME, 4, b"m4"))}
    assert (out.state.next_seq, out.state.next_enqueue_seq) == (10, 5)


def test_rejected_not_leader_redirects_to_the_hinted_leader() -> None:
    s, _ = publish(registered(), 33)
    out = client.handle_ra_event(QNAME, S1, ("rejected", ("not_leader", S2, 0)), s)
    assert out.state.leader == S2
    assert [e.server for e in out.effects[:-1]] == [S2] * 33
    assert [e.command[1] for e in out.effects[:-1]] == list(range(1, 34))
    assert [e.correlation for e in out.effects[:-1]] == list(range(33, 66))
    assert out.effects[-1] == CancelTimer("cancel_timer", "slow")
    # pending does not shrink, so the session stays slow
    assert (len(out.state.pending), out.state.slow) == (33, True)


@pytest.mark.parametrize("hint", [None, S1])
def test_rejected_not_leader_without_news_is_ignored(hint: Any) -> None:
    s, _ = publish(registered(), 2)
    out = client.handle_ra_event(QNAME, S2, ("rejected", ("not_leader", hint, 0)), s)
    assert (out.effects, out.state.leader, out.state.pending) == ([], S1, s.pending)


def test_slow_timer_looks_for_a_leader() -> None:
    s, _ = publish(registered(), 2)
    out = client.handle_ra_event(QNAME, S1, "timeout", s)
    assert out.effects == [FindLeader("find_leader", (S1, S2, S3))]
    out = client.handle_ra_event(QNAME, S1, "timeout", s, [None])
    assert [e.name for e in out.effects] == ["send_after"]
    out = client.handle_ra_event(QNAME, S1, "timeout", s, [S3])
    assert [(e.server, e.correlation) for e in out.effects] == [(S3, 2), (S3, 3)]


# --- commands ----------------------------------------------------------------------------


def test_settle_return_discard_use_the_consumer_key() -> None:
    s = registered(machine_version=7)
    s.consumers["ctag"] = ClientConsumer(key=12, last_msg_id=0, ack=True)
    out = client.settle("ctag", [0, 1], s)
    assert out.effects == [pipe(S1, make_settle(12, [0, 1]), 0, "normal")]
    assert out.state.pending == {0: (None, make_settle(12, [0, 1]))}
    out = client.discard("other", [3], out.state)
    assert out.effects == [pipe(S1, make_discard(("other", ME), [3]), 1, "normal")]
    out = client.return_("ctag", [2], out.state)
    assert out.effects == [CastAuxCommand("cast_aux_command", S1, (make_return(12, [2]), 2, ME))]
    s8 = registered(machine_version=8)
    s8.consumers["ctag"] = ClientConsumer(key=12, last_msg_id=0, ack=True)
    assert client.return_("ctag", [2], s8).effects == [
        pipe(S1, make_return(12, [2]), 0, "normal")]


def test_modify_flushes_stash_first_and_ignores_slow() -> None:
    s, _ = publish(registered(), 33)
    s.consumers["ctag"] = ClientConsumer(key=7, last_msg_id=9, ack=True)
    s = client.settle("ctag", [1], s).state
    s = client.discard("ctag", [2], s).state
    out = client.modify("ctag", [3], True, False, {"x-a": 1}, s)
    assert out.effects == [pipe(S1, make_settle(7, [1]), 33, "normal"),
                           pipe(S1, make_discard(7, [2]), 34, "normal"),
                           pipe(S1, make_modify(7, [3], True, False, {"x-a": 1}), 35, "normal")]
    assert out.state.unsent_commands == {}


def test_credit_is_sent_even_when_slow() -> None:
    s, _ = publish(registered(), 33)
    out = client.credit("ctag", 5, 10, True, s)
    assert out.effects == [pipe(S1, make_credit(("ctag", ME), 10, 5, True), 33, "normal")]


def test_checkout_records_consumer_from_reply() -> None:
    s = fresh()
    cmd = make_checkout(("ctag", ME), ("auto", ("simple_prefetch", 2000)), {"ack": True})
    out = client.checkout("ctag", ("simple_prefetch", 0), {"ack": True}, s)
    assert out.effects == [ProcessCommand("process_command", (S1, S2, S3), cmd, TIMEOUT)]
    info = {"next_msg_id": 4, "num_checked_out": 0, "key": 3, "credit": 2000,
            "delivery_count": 0, "is_active": True}
    out = client.checkout("ctag", ("simple_prefetch", 0), {"ack": True}, s,
                          [("ok", ("ok", info), S2)])
    assert (out.tag, out.result, out.state.leader) == ("ok", info, S2)
    assert out.state.consumers == {"ctag": ClientConsumer(3, 3, True)}
    busy = dict(info, num_checked_out=2)
    out2 = client.checkout("t2", ("credited", 0), {"ack": False}, out.state,
                           [("ok", ("ok", busy), S2)])
    assert out2.state.consumers["t2"] == ClientConsumer(3, None, False)
    # the known leader is tried first now
    assert client.checkout("t3", ("credited", 0), {}, out.state).effects[0].servers == (
        S2, S1, S3)
    err = client.checkout("t3", ("credited", 0), {}, out.state, [("timeout", S2)])
    assert (err.tag, err.state, err.result) == ("timeout", out.state, ("timeout", S2))


def test_cancel_checkout_flushes_and_forgets_consumer() -> None:
    s, _ = publish(registered(), 33)
    s.consumers["ctag"] = ClientConsumer(key=7, last_msg_id=9, ack=True)
    s = client.settle("ctag", [9], s).state
    assert client.cancel_checkout("nope", "cancel", s) == Out("ok", s, [], [])
    out = client.cancel_checkout("ctag", "cancel", s)
    call = ProcessCommand("process_command", (S1, S2, S3),
                          make_checkout(("ctag", ME), "cancel", {}), TIMEOUT)
    assert out == Out("call", s, [], [pipe(S1, make_settle(7, [9]), 33, "normal"), call])
    out = client.cancel_checkout("ctag", "cancel", s, [("ok", ("ok", {}), S1)])
    # the flush was handed out with the call; it is not repeated
    assert (out.tag, out.effects, out.state.consumers) == ("ok", [], {})
    assert 33 in out.state.pending


def test_dequeue() -> None:
    s = registered()
    cmd = make_checkout(("g", ME), ("dequeue", "settled"), {})
    assert client.dequeue(QNAME, "g", "settled", s).effects == [
        ProcessCommand("process_command", (S1,), cmd, TIMEOUT)]
    out = client.dequeue(QNAME, "g", "settled", s, [("ok", ("dequeue", "empty"), S1)])
    assert out.tag == "empty"
    msg = BasicMessage(b"body")
    reply = ("ok", ("dequeue", (4, ({"size": 4, "acquired_count": 2}, msg)), 7), S2)
    out = client.dequeue(QNAME, "g", "settled", s, [reply])
    ready, (qn, qref, msg_id, redelivered, m) = out.result
    assert (out.tag, ready, qn, qref, msg_id, redelivered) == ("ok", 7, QNAME, "q1", 4, True)
    assert m.annotations == {"x-delivery-count": 2}
    out = client.dequeue(QNAME, "g", "settled", s,
                         [("ok", ("error", ("unsupported", "single_active_consumer")), S1)])
    assert (out.tag, out.result) == ("error", ("error", ("unsupported",
                                                         "single_active_consumer")))


# --- deliveries --------------------------------------------------------------------------


def consuming(last: int | None = 1, ack: bool = True) -> ClientState:
    s = registered()
    s.consumers["ctag"] = ClientConsumer(key=5, last_msg_id=last, ack=ack)
    return s


def dlv(*ids: int) -> tuple[str, tuple[Any, ...]]:
    return ("machine", ("delivery", "ctag", [(i, (1, b"%d" % i)) for i in ids]))


def delivered(out: Out) -> list[tuple[int, bool, Any]]:
    return [(mid, red, m) for a in out.actions if a[0] == "deliver"
            for _, _, mid, red, m in a[3]]


def test_in_order_delivery_is_accepted() -> None:
    out = client.handle_ra_event(QNAME, S1, dlv(2, 3), consuming())
    assert out.actions == [("deliver", "ctag", True, [(QNAME, "q1", 2, False, b"2"),
                                                     (QNAME, "q1", 3, False, b"3")])]
    assert out.effects == []
    assert out.state.consumers["ctag"].last_msg_id == 3


def test_undefined_last_msg_id_accepts_anything() -> None:
    out = client.handle_ra_event(QNAME, S1, dlv(40), consuming(last=None))
    assert [m[0] for m in delivered(out)] == [40]
    assert out.state.consumers["ctag"].last_msg_id == 40


def test_gap_is_filled_from_the_local_member() -> None:
    s = consuming()
    out = client.handle_ra_event(QNAME, S2, dlv(5, 6), s)
    req = AuxCommand("aux_command", S1, ("get_checked_out", 5, [2, 3, 4]))
    assert out == Out("call", s, [], [req])
    # id 3 is no longer checked out: simply absent
    missing = ("ok", [(2, (1, b"2")), (4, ({"size": 1, "acquired_count": 1}, b"4"))])
    out = client.handle_ra_event(QNAME, S2, dlv(5, 6), s, [missing])
    assert [(m[0], m[1]) for m in delivered(out)] == [(2, False), (4, True), (5, False),
                                                      (6, False)]
    assert out.state.consumers["ctag"].last_msg_id == 6


def test_gap_fill_without_local_member_asks_leader_and_errors_are_protocol_errors() -> None:
    s = init([S2, S3], ME)
    s.leader = S3
    s.consumers["ctag"] = ClientConsumer(key=5, last_msg_id=1, ack=True)
    out = client.handle_ra_event(QNAME, S3, dlv(4), s)
    assert out.effects == [AuxCommand("aux_command", S3, ("get_checked_out", 5, [2, 3]))]
    out = client.handle_ra_event(QNAME, S3, dlv(4), s, [("timeout", S3)])
    assert out.tag == "protocol_error" and out.result[0] == "internal_error"


def test_duplicates_are_dropped() -> None:
    s = consuming(last=3)
    out = client.handle_ra_event(QNAME, S1, dlv(2, 3), s)
    assert (out.actions, out.effects, out.state) == ([], [], s)
    out = client.handle_ra_event(QNAME, S1, dlv(3, 4, 5), s)
    assert [m[0] for m in delivered(out)] == [4, 5]


def test_delivery_for_unknown_tag_is_returned() -> None:
    out = client.handle_ra_event(QNAME, S1, dlv(0, 1), registered(machine_version=7))
    assert out.actions == []
    assert out.effects == [CastAuxCommand("cast_aux_command", S1,
                                          (make_return(("ctag", ME), [0, 1]), 0, ME))]
    out = client.handle_ra_event(QNAME, S1, dlv(0, 1), registered(machine_version=8))
    assert out.actions == []
    assert out.effects == [pipe(S1, make_return(("ctag", ME), [0, 1]), 0, "normal")]


def test_no_ack_consumer_settles_automatically() -> None:
    out = client.handle_ra_event(QNAME, S1, dlv(2, 3), consuming(ack=False))
    assert [a[0] for a in out.actions] == ["deliver"] and out.actions[0][2] is False
    assert out.effects == [pipe(S1, make_settle(5, [2, 3]), 0, "normal")]


# --- other events ------------------------------------------------------------------------


def test_eol_unblocks_and_other_machine_messages_pass_through() -> None:
    s = registered()
    out = client.handle_ra_event(QNAME, S1, ("machine", "eol"), s)
    assert (out.tag, out.actions) == ("eol", [("unblock", "q1")])
    cr = ("credit_reply", "ctag", 3, 0, 2, False)
    assert client.handle_ra_event(QNAME, S1, ("machine", cr), s).actions == [cr]
