"""Applying committed entries: Meta map, reply modes, batched notifications, effects order."""

from __future__ import annotations

from typing import Any

import pytest

from ra import server as core
from ra.apply import DeleteAndTerminate, apply_to
from ra.machine import Machine
from ra.types import AppendEntriesReply, usr
from tests.ra.ra_testlib import S1, S2, S3, entries, leader, server


class Recorder(Machine):
    """Records every Meta map; replies per command; emits effects on request."""

    def __init__(self, version: int = 0) -> None:
        self.metas: list[dict[str, Any]] = []
        self._version = version

    def init(self, config: dict[str, Any]) -> list[Any]:
        return []

    def version(self) -> int:
        return self._version

    def apply(self, meta: dict[str, Any], command: Any, state: list[Any]) -> tuple[Any, ...]:
        self.metas.append(meta)
        state = [*state, command]
        match command:
            case ("effects", effs):
                return (state, "ok", effs)
            case ("silent",):
                return (state, "$ra_no_reply")
        return (state, ("reply", command))


def log_of(*cmds: Any, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i + 1, term, c) for i, c in enumerate(cmds)]


def test_meta_map_carries_index_term_version_time_from_and_reply_mode() -> None:
    mac = Recorder()
    log = log_of(usr({"ts": 111, "from": ("pid", "t")}, "a", "await_consensus"),
                 usr({"ts": 222}, "b", ("notify", 7, "p1")))
    st = server(log=log, machine=mac, term=1)
    apply_to(2, st, [])
    assert mac.metas == [
        {"index": 1, "term": 1, "machine_version": 0, "system_time": 111,
         "from": ("pid", "t"), "reply_mode": "await_consensus"},
        {"index": 2, "term": 1, "machine_version": 0, "system_time": 222,
         "reply_mode": ("notify", 7, "p1")},
    ]


def test_notifications_are_batched_per_pid_in_log_order_and_come_first() -> None:
    log = log_of(usr({"ts": 0}, "a", ("notify", 1, "p1")),
                 usr({"ts": 0}, "b", ("notify", 2, "p2")),
                 usr({"ts": 0}, ("effects", [("send_msg", "x", "m")]), ("notify", 3, "p1")),
                 usr({"ts": 0}, "d", ("notify", 4, "p1")))
    st = server(log=log, machine=Recorder(), term=1)
    effects = apply_to(4, st, [("aux", "eval")])
    assert effects == [
        ("notify", {"p1": [(1, ("reply", "a")), (3, "ok"), (4, ("reply", "d"))],
                    "p2": [(2, ("reply", "b"))]}),
        ("aux", "eval"),
        ("send_msg", "x", "m"),
    ]
    assert st.last_applied == 4


def test_await_consensus_reply_follows_the_entrys_machine_effects() -> None:
    log = log_of(usr({"ts": 0, "from": "f1"}, ("effects", [("timer", "t", 5), [("aux", 1)]]),
                     "await_consensus"),
                 usr({"ts": 0, "from": "f2"}, "b",
                     ("await_consensus", {"reply_from": "local"})))
    st = server(log=log, machine=Recorder(), term=1)
    assert apply_to(2, st, []) == [
        ("timer", "t", 5), ("aux", 1), ("reply", "f1", ("wrap_reply", "ok")),
        ("reply", "f2", ("wrap_reply", ("reply", "b")), "local"),
    ]


def test_ra_no_reply_and_noreply_mode_produce_no_reply() -> None:
    log = log_of(usr({"ts": 0, "from": "f"}, ("silent",), "await_consensus"),
                 usr({"ts": 0}, "x", "noreply"),
                 usr({"ts": 0}, ("silent",), ("notify", 1, "p")))
    st = server(log=log, machine=Recorder(), term=1)
    assert apply_to(3, st, []) == []


def test_apply_stops_at_the_last_local_index() -> None:
    st = server(log=entries(1, 1), term=1)
    apply_to(10, st, [])
    assert st.last_applied == 2 and st.machine_state == 3


def test_current_term_noop_permits_cluster_changes_older_one_does_not() -> None:
    st = server(log=[(1, 1, ("noop", {"ts": 0}, 0))], term=2)
    apply_to(1, st, [])
    assert st.last_applied == 1 and st.cluster_change_permitted is False
    st = server(log=[(1, 2, ("noop", {"ts": 0}, 0))], term=2)
    apply_to(1, st, [])
    assert st.cluster_change_permitted is True


def test_noop_with_a_newer_supported_version_switches_and_applies_machine_version() -> None:
    mac = Recorder(version=2)
    st = server(log=[(1, 1, ("noop", {"ts": 5}, 2)), (2, 1, usr({"ts": 0}, "x"))],
                machine=mac, term=1)
    apply_to(2, st, [])
    assert st.cfg.effective_machine_version == 2
    assert st.machine_state == [("machine_version", 0, 2), "x"]
    assert mac.metas[1]["machine_version"] == 2


def test_noop_with_an_unknown_version_stops_applying() -> None:
    st = server(log=[(1, 1, ("noop", {"ts": 0}, 5)), *entries(1, first=2)], term=1)
    apply_to(2, st, [])
    assert st.last_applied == 0 and st.cfg.effective_machine_version == 5
    apply_to(2, st, [])
    assert st.last_applied == 0


def test_leader_notifies_clients_when_a_quorum_has_written() -> None:
    st = leader(log=entries(2), term=2)
    for corr in (10, 11):
        core.handle("leader", ("command", usr({"ts": 0}, ("add", corr), ("notify", corr, "c"))), st)
    core.handle("leader", ("ra_log_event", ("written", 2, [(1, 3)])), st)
    assert st.commit_index == 0
    _, st, effects = core.handle("leader", (S3, AppendEntriesReply(2, True, 4, 3, 2)), st)
    assert st.commit_index == 3
    assert effects[:3] == [("next_event", "info", "pipeline_rpcs"), ("notify",
                           {"c": [(10, 1 + 10), (11, 1 + 10 + 11)]}), ("aux", "eval")]


def test_non_leader_rejects_notifying_commands_with_a_leader_hint() -> None:
    st = server(S2, term=1)
    cmd = ("$usr", ("add", 1), ("notify", 5, "client"))
    assert core.command_not_leader("follower", "normal", cmd, st) == []  # leader unknown
    st.leader_id = S1
    assert core.command_not_leader("follower", "normal", cmd, st) == [
        ("send_ra_event", "client", ("rejected", ("not_leader", S1, 5)))]
    assert core.command_not_leader("await_condition", "normal", cmd, st) == [
        ("send_ra_event", "client", ("rejected", ("not_leader", None, 5)))]


def test_follower_forwards_fire_and_forget_commands_to_the_leader() -> None:
    st = server(S2, term=1)
    cmd = ("$usr", ("add", 1), "noreply")
    assert core.command_not_leader("follower", "low", cmd, st) == []
    st.leader_id = S1
    assert core.command_not_leader("follower", "low", cmd, st) == [
        ("cast", S1, ("command", "low", ("$usr", ("add", 1), "noreply")))]
    assert core.command_not_leader("candidate", "low", cmd, st) == []


def test_recover_replays_committed_entries_discarding_effects_and_adopts_tail_config() -> None:
    s4 = ("s4", "n4")
    change = (3, 1, ("$ra_cluster_change", {"ts": 0}, {S1: {}, S2: {}, S3: {}, s4: {}},
                     "noreply"))
    st = server(log=[*entries(1, 1), change], term=1, last_applied=2)
    assert (st.commit_index, st.last_applied) == (2, 0)
    core.recover(st)
    assert st.last_applied == 2 and st.machine_state == 3
    assert set(st.cluster) == {S1, S2, S3, s4} and st.cluster_index_term == (3, 1)


def test_cluster_deletion_stops_the_apply_loop_after_replying() -> None:
    delete = ("$ra_cluster", {"ts": 0, "from": "caller"}, "delete", "await_consensus")
    st = server(log=[*entries(1), (2, 1, delete), *entries(1, first=3)], term=1)
    with pytest.raises(DeleteAndTerminate) as ended:
        apply_to(3, st, [("aux", "eval")])
    assert st.last_applied == 2 and st.machine_state == 1
    assert ended.value.effects == [("aux", "eval"), ("reply", "caller", ("wrap_reply", "ok"))]


def test_unknown_entries_count_as_applied() -> None:
    st = server(log=[(1, 1, ("something", "odd")), *entries(1, first=2)], term=1)
    apply_to(2, st, [])
    assert st.last_applied == 2 and st.machine_state == 2
