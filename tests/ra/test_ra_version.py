"""Machine versioning in the pure core.

The effective machine version of a cluster only moves forward, and only
through an applied noop. Under the ``all`` strategy a leader asks every peer
what its code supports (``info_rpc``) and announces a newer version only once
every member supports it; under ``quorum``, or alone, it announces its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from ra import server as core
from ra import versioning
from ra.apply import apply_to
from ra.log import MemoryLog
from ra.machine import Machine
from ra.state import init
from ra.types import AppendEntriesRpc, InfoReply, InfoRpc, usr
from tests.ra.ra_testlib import MEMBERS, S1, S2, S3, leader, of_tag, rpcs, server

# ---------------------------------------------------------------------------
# a machine whose code supports versions 1 .. latest
# ---------------------------------------------------------------------------


class V1(Machine):
    """Version 1: state is ``(items, conversions)``; items are tagged ``v1``.
    Every Meta map it is given is recorded in `metas`."""

    TAG = "v1"

    def __init__(self, metas: list[dict[str, Any]]) -> None:
        self.metas = metas

    def init(self, config: dict[str, Any]) -> Any:
        return ((), ())

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        self.metas.append(meta)
        items, conversions = state
        match command:
            case ("put", value):
                return ((*items, (self.TAG, value)), conversions), ("ok", self.TAG)
        return state, ("error", "unknown_command")


class V2(V1):
    """Version 2 converts a version-1 state when ``{machine_version, 1, 2}`` is
    applied, recording where (index) and with which Meta version it ran."""

    TAG = "v2"

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        match command:
            case ("machine_version", old, new):
                self.metas.append(meta)
                items, conversions = state
                converted = tuple(("v2", value) for _tag, value in items)
                record = (old, new, meta["index"], meta["machine_version"])
                return (converted, (*conversions, record)), "ok"
        return super().apply(meta, command, state)


class VersionedMachine(Machine):
    """The configured machine; its code supports versions up to `latest`, and
    `which_module` picks the code of a version, as a ``{module, Mod, Args}``
    machine with several versions does in Ra. Version 0 runs version 1 code."""

    def __init__(self, latest: int) -> None:
        self.latest = latest
        self.metas: list[dict[str, Any]] = []
        self.modules: dict[int, Machine] = {1: V1(self.metas), 2: V2(self.metas)}

    def version(self) -> int:
        return self.latest

    def which_module(self, version: int) -> Machine:
        if version > self.latest:
            raise ValueError(f"no module for machine version {version}")
        return self.modules[min(max(version, 1), 2)]

    def init(self, config: dict[str, Any]) -> Any:
        return self.which_module(config["machine_version"]).init(config)

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return self.which_module(meta["machine_version"]).apply(meta, command, state)


def noop(version: int, ts: int = 0) -> tuple[Any, ...]:
    return ("noop", {"ts": ts}, version)


def put(value: Any) -> tuple[Any, ...]:
    return usr({"ts": 0}, ("put", value), "noreply")


def noop_commands(effects: list[Any]) -> list[int]:
    """Versions of the noops a leader is about to append."""
    return [eff[2][1][2] for eff in of_tag(effects, "next_event")
            if eff[2][0] == "command" and eff[2][1][0] == "noop"]


def info_rpcs(effects: list[Any]) -> list[Any]:
    return sorted(eff[1] for eff in of_tag(effects, "send_rpc") if isinstance(eff[2], InfoRpc))


# ---------------------------------------------------------------------------
# the new leader's noop
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "strategy", "noop_version", "asked"),
    [
        # all (the default): keep the effective version, ask every peer
        (MEMBERS, "all", 1, [S2, S3]),
        # quorum: announce the leader's own latest version at once
        (MEMBERS, "quorum", 2, []),
        # alone: nobody to ask, the leader's code is the cluster's code
        ([S1], "all", 2, []),
    ],
)
def test_a_new_leader_noop_carries_the_version_it_will_run(
    members: list[Any], strategy: str, noop_version: int, asked: list[Any]
) -> None:
    st = leader(members=members, machine=VersionedMachine(2), initial_machine_version=1,
                system_config={"machine_upgrade_strategy": strategy})
    effects = core.post_election_effects(st)
    assert noop_commands(effects) == [noop_version]
    assert info_rpcs(effects) == asked


def test_a_leader_asks_only_peers_whose_version_is_unknown_or_older_than_its_own() -> None:
    st = leader(machine=VersionedMachine(2), initial_machine_version=1)
    st.cluster[S2].machine_version = 2
    st.cluster[S3].machine_version = 1
    assert info_rpcs(core.post_election_effects(st)) == [S3]
    # and again on every tick, so a peer restarted with newer code is noticed
    assert info_rpcs(core.tick("leader", st)) == [S3]
    st.cluster[S3].machine_version = 2
    assert info_rpcs(core.tick("leader", st)) == []


def test_the_info_rpc_asks_for_the_machine_version_in_the_leaders_term() -> None:
    st = leader(term=4, machine=VersionedMachine(2), initial_machine_version=1)
    sent = rpcs(core.tick("leader", st))
    assert sent[S2] == InfoRpc(from_=S1, term=4, keys=("machine_version",))


# ---------------------------------------------------------------------------
# deciding on an upgrade from info replies (strategy all)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "effective", "known", "reply_from", "reply_version", "upgrade_to"),
    [
        # every member supports 2 once S3 answers: upgrade
        (2, 1, {S2: 2}, S3, 2, [2]),
        # S3's version still unknown: stay
        (2, 1, {}, S2, 2, []),
        # S3's code is old: stay
        (2, 1, {S2: 2}, S3, 1, []),
        # the cluster moves to the newest version *every* member supports
        (3, 1, {S2: 3}, S3, 2, [2]),
        # the leader's own code is the limit
        (2, 1, {S2: 3}, S3, 3, [2]),
        # already there: nothing to announce
        (2, 2, {S2: 2}, S3, 2, []),
    ],
)
def test_an_info_reply_upgrades_only_when_every_member_supports_the_version(
    ours: int, effective: int, known: dict[Any, int], reply_from: Any, reply_version: int,
    upgrade_to: list[int],
) -> None:
    st = leader(machine=VersionedMachine(ours), initial_machine_version=effective)
    for sid, ver in known.items():
        st.cluster[sid].machine_version = ver
    reply = InfoReply(from_=reply_from, term=1, keys=("machine_version",),
                      info={"machine_version": reply_version})
    role, st, effects = core.handle("leader", reply, st)
    assert role == "leader"
    assert st.cluster[reply_from].machine_version == reply_version
    assert noop_commands(effects) == upgrade_to


def test_an_info_reply_without_the_key_forgets_what_was_known() -> None:
    st = leader(machine=VersionedMachine(2), initial_machine_version=1)
    st.cluster[S2].machine_version = 2
    st.cluster[S3].machine_version = 2
    _, st, effects = core.handle("leader", InfoReply(S3, 1, ("machine_version",)), st)
    assert st.cluster[S3].machine_version is None
    assert noop_commands(effects) == []


def test_an_info_reply_from_a_removed_member_is_ignored() -> None:
    st = leader(machine=VersionedMachine(2), initial_machine_version=1)
    reply = InfoReply(("gone", "n9"), 1, ("machine_version",), {"machine_version": 2})
    assert core.handle("leader", reply, st)[2] == []


def test_an_info_message_with_a_higher_term_deposes_the_leader() -> None:
    st = leader(term=2, machine=VersionedMachine(2))
    msg = InfoRpc(from_=S2, term=3, keys=("machine_version",))
    role, st, effects = core.handle("leader", msg, st)
    assert (role, st.current_term, st.leader_id) == ("follower", 3, None)
    assert effects == [("next_event", msg)]


# ---------------------------------------------------------------------------
# answering info requests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raft_state", "info"),
    [
        # leaders and followers report what their code supports
        ("leader", {"machine_version": 2}),
        ("follower", {"machine_version": 2}),
        # members in the middle of an election or a snapshot report nothing
        ("candidate", {}),
        ("pre_vote", {}),
        ("receive_snapshot", {}),
    ],
)
def test_members_answer_info_requests_with_their_codes_version(
    raft_state: str, info: dict[str, int]
) -> None:
    st = server(sid=S2, term=3, machine=VersionedMachine(2), initial_machine_version=1)
    rpc = InfoRpc(from_=S1, term=3, keys=("machine_version", "unknown_key"))
    role, st, effects = core.handle(raft_state, rpc, st)
    assert role == raft_state
    assert effects == [("cast", S1, InfoReply(S2, 3, rpc.keys, info))]


@pytest.mark.parametrize("raft_state", ["follower", "candidate", "pre_vote"])
def test_an_info_request_with_a_higher_term_is_handled_as_a_follower(raft_state: str) -> None:
    st = server(sid=S2, term=3, machine=VersionedMachine(2))
    rpc = InfoRpc(from_=S1, term=5, keys=("machine_version",))
    role, st, effects = core.handle(raft_state, rpc, st)
    assert role == "follower"
    while effects == [("next_event", rpc)]:
        # re-dispatched until the follower, in the new term, answers
        role, st, effects = core.handle(role, rpc, st)
    assert (role, st.current_term) == ("follower", 5)
    assert effects == [("cast", S1, InfoReply(S2, 5, rpc.keys, {"machine_version": 2}))]


# ---------------------------------------------------------------------------
# applying noops
# ---------------------------------------------------------------------------


def test_applying_a_higher_noop_switches_module_and_converts_the_state_once() -> None:
    log = [(1, 1, put("a")), (2, 1, noop(2, ts=77)), (3, 1, put("b")),
           (4, 2, noop(2)), (5, 2, noop(1)), (6, 2, put("c"))]
    mac = VersionedMachine(2)
    st = server(log=log, term=2, machine=mac, initial_machine_version=1)
    apply_to(6, st, [])
    cfg = st.cfg
    assert st.last_applied == 6
    assert (cfg.effective_machine_version, cfg.effective_machine_module) == (2, mac.modules[2])
    assert cfg.machine_versions == [(2, 2), (0, 1)]
    items, conversions = st.machine_state
    # converted once, at index 2; later noops of the same or a lower version change nothing
    assert conversions == ((1, 2, 2, 2),)
    assert items == (("v2", "a"), ("v2", "b"), ("v2", "c"))
    # the Meta map of every command carries the effective version
    assert [meta["machine_version"] for meta in mac.metas] == [1, 2, 2, 2]


def test_the_conversion_meta_carries_the_local_codes_version_as_ra_builds_it() -> None:
    # Ra builds the conversion's Meta twice; the first build, from the local
    # code's latest version (3 here), is the one the machine sees
    mac = VersionedMachine(3)
    st = server(log=[(1, 1, noop(2, ts=9))], machine=mac, initial_machine_version=1)
    apply_to(1, st, [])
    assert st.cfg.effective_machine_version == 2
    assert mac.metas == [{"index": 1, "term": 1, "machine_version": 3, "system_time": 9,
                          "reply_mode": "none"}]


def test_a_member_whose_code_is_older_than_the_effective_version_stops_applying() -> None:
    log = [(1, 1, put("a")), (2, 1, noop(2)), (3, 1, put("b"))]
    st = server(log=log, machine=VersionedMachine(1), initial_machine_version=1)
    apply_to(3, st, [])
    # the unknown version becomes effective; nothing from the noop on is applied
    assert (st.last_applied, st.cfg.effective_machine_version) == (1, 2)
    assert st.machine_state == ((("v1", "a"),), ())
    st.commit_index = 3
    apply_to(3, st, [])
    assert st.last_applied == 1


def test_a_member_that_stopped_applying_still_replicates() -> None:
    log = [(1, 1, noop(2))]
    st = server(sid=S2, log=log, term=1, machine=VersionedMachine(1), initial_machine_version=1)
    apply_to(1, st, [])
    assert st.last_applied == 0
    rpc = AppendEntriesRpc(term=1, leader_id=S1, leader_commit=2, prev_log_index=1,
                           prev_log_term=1, entries=((2, 1, put("b")),))
    role, st, _ = core.handle("follower", rpc, st)
    assert role == "follower"
    assert st.log.last_index_term() == (2, 1) and st.last_applied == 0


# ---------------------------------------------------------------------------
# initial_machine_version and recovery
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latest", "initial", "effective"),
    [(2, 0, 0), (2, 1, 1), (2, 2, 2), (2, 5, 2)],
)
def test_initial_machine_version_is_capped_by_the_codes_version(
    latest: int, initial: int, effective: int
) -> None:
    st = server(machine=VersionedMachine(latest), initial_machine_version=initial)
    assert st.cfg.machine_version == latest
    assert st.cfg.effective_machine_version == effective
    assert st.cfg.machine_versions == [(0, effective)]


@pytest.mark.parametrize(
    ("strategy", "latest", "initial", "result"),
    [
        ("all", 2, 2, "ok"),
        ("all", 2, 1, "ok"),
        ("all", 1, 2, ("error", "invalid_initial_machine_version")),
        # quorum lets a cluster start ahead of a member's code
        ("quorum", 1, 2, "ok"),
    ],
)
def test_a_new_server_may_not_start_above_its_codes_version_under_strategy_all(
    strategy: str, latest: int, initial: int, result: Any
) -> None:
    config = {"machine": VersionedMachine(latest), "initial_machine_version": initial}
    assert versioning.validate_config(config, {"machine_upgrade_strategy": strategy}) == result


def test_a_recovered_snapshot_sets_the_effective_version() -> None:
    meta = {"index": 4, "term": 1, "cluster": {sid: {} for sid in MEMBERS},
            "machine_version": 2}
    log = MemoryLog([], snapshot=(meta, ((("v2", "a"),), ((1, 2, 3, 2),))))
    mac = VersionedMachine(2)
    st = init({"id": S1, "initial_members": MEMBERS, "machine": mac, "log": log,
               "initial_machine_version": 1})
    assert st.cfg.effective_machine_version == 2
    assert st.cfg.machine_versions == [(4, 2)]
    assert st.cfg.effective_machine_module is mac.modules[2]
