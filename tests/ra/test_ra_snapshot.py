"""Snapshots, checkpoints and snapshot replication."""

from __future__ import annotations

import os
import random

import pytest

from ra import release_cursor, snapshot_store
from ra import server as core
from ra import snapshot as ra_snapshot
from ra.log import CorruptLog, MemoryLog
from ra.replication import initialise_peers
from ra.sim import CounterMachine
from ra.state import ServerState, init
from ra.types import (
    AppendEntriesReply,
    AppendEntriesRpc,
    HeartbeatRpc,
    InstallSnapshotResult,
    InstallSnapshotRpc,
    RequestVoteRpc,
)
from tests.ra.ra_testlib import S1, S2, S3, entries, leader, of_tag, server

CLUSTER = {S1: {}, S2: {}, S3: {}}


def meta(idx: int, term: int, ver: int = 0) -> dict[str, object]:
    return {"index": idx, "term": term, "cluster": CLUSTER, "machine_version": ver}


def written_snapshot(idx: int, term: int, kind: str = "snapshot") -> tuple[str, object]:
    return ("ra_log_event", ("snapshot_written", (idx, term), [], kind))


def small_log(n: int, term: int = 1, interval: int = 4) -> MemoryLog:
    log = MemoryLog(entries(*([term] * n)), min_snapshot_interval=interval,
                    min_checkpoint_interval=interval)
    log.take_wal_writes()
    return log


# --- the log ----------------------------------------------------------------


def test_release_cursor_writes_in_the_background_and_truncates_only_when_written() -> None:
    log = small_log(10)
    effects = log.update_release_cursor(6, CLUSTER, 0, "state6")
    assert effects == [("bg_work", ("write_snapshot", "snapshot", meta(6, 1), "state6"),
                        ("snapshot_error", (6, 1), "snapshot"))]
    assert log.fetch(1) is not None and log.snapshot_index_term() is None
    log.handle_event(written_snapshot(6, 1)[1])
    assert log.snapshot_index_term() == (6, 1)
    assert log.first_index() == 7 and log.fetch(6) is None and log.fetch(7) is not None
    assert log.last_index_term() == (10, 1)
    assert log.current_snapshot() == (meta(6, 1), "state6")


@pytest.mark.parametrize(
    ("snap_first", "idx", "starts"),
    [
        (None, 4, False),  # not above the interval (4)
        (None, 5, True),
        (5, 9, False),  # 9 is not > 5 + 4
        (5, 10, True),
    ],
)
def test_min_snapshot_interval(snap_first: int | None, idx: int, starts: bool) -> None:
    log = small_log(12)
    if snap_first is not None:
        log.update_release_cursor(snap_first, CLUSTER, 0, "s")
        log.handle_event(written_snapshot(snap_first, 1)[1])
    assert bool(log.update_release_cursor(idx, CLUSTER, 0, "s")) is starts


def test_one_snapshot_write_at_a_time_and_errors_clear_it() -> None:
    log = small_log(12)
    assert log.update_release_cursor(6, CLUSTER, 0, "a")
    assert log.update_release_cursor(11, CLUSTER, 0, "b") == []
    log.handle_event(("snapshot_error", (6, 1), "snapshot", "enospc"))
    assert log.snapshot_index_term() is None and log.pending_snapshot() is None
    assert log.update_release_cursor(11, CLUSTER, 0, "b")


def test_stale_snapshot_written_is_ignored() -> None:
    log = small_log(12)
    log.update_release_cursor(6, CLUSTER, 0, "a")
    log.install_snapshot(meta(10, 1), "installed")
    log.handle_event(written_snapshot(6, 1)[1])
    assert log.snapshot_index_term() == (10, 1)
    assert log.current_snapshot() == (meta(10, 1), "installed")


def test_written_events_below_the_snapshot_are_harmless() -> None:
    log = MemoryLog(entries(1, 1, 1, 1, 1, 1), written_upto=2, min_snapshot_interval=1)
    log.update_release_cursor(4, CLUSTER, 0, "s")
    log.handle_event(written_snapshot(4, 1)[1])
    # the snapshot is durable, so last_written is raised to it
    assert log.last_written() == (4, 1)
    log.handle_event(("written", 1, [(3, 6)]))
    assert log.last_written() == (6, 1) and log.pending() == []


def test_checkpoints_never_truncate_and_promotion_does() -> None:
    log = small_log(12)
    log.checkpoint(5, CLUSTER, 0, "c5")
    log.handle_event(written_snapshot(5, 1, "checkpoint")[1])
    assert log.fetch(1) is not None and log.snapshot_index_term() is None
    assert log.latest_checkpoint_index() == 5
    # within min_checkpoint_interval of the last one: skipped
    assert log.checkpoint(9, CLUSTER, 0, "c9") == []
    log.checkpoint(10, CLUSTER, 0, "c10")
    log.handle_event(written_snapshot(10, 1, "checkpoint")[1])
    # promote the newest checkpoint at or below 8: the one at 5
    effects = log.promote_checkpoint(8)
    assert effects == [("bg_work", ("promote_checkpoint", (5, 1)),
                        ("snapshot_error", (5, 1), "snapshot"))]
    log.handle_event(written_snapshot(5, 1)[1])
    assert log.snapshot_index_term() == (5, 1) and log.first_index() == 6
    assert [c[0]["index"] for c in log.checkpoints()] == [10]
    assert log.recovery_snapshot() == (meta(10, 1), "c10")


def test_promotion_without_a_checkpoint_does_nothing() -> None:
    log = small_log(12)
    assert log.promote_checkpoint(8) == []


def test_over_max_checkpoints_the_one_between_two_close_ones_goes() -> None:
    log = MemoryLog(entries(*[1] * 12), min_checkpoint_interval=0, max_checkpoints=2)
    for idx in (3, 6, 9):
        log.checkpoint(idx, CLUSTER, 0, idx)
        log.handle_event(written_snapshot(idx, 1, "checkpoint")[1])
    assert [c[1] for c in log.checkpoints()] == [3, 9]


def test_a_log_must_continue_its_snapshot() -> None:
    with pytest.raises(CorruptLog):
        MemoryLog(entries(1, 1, first=8), snapshot=(meta(5, 1), 0))
    log = MemoryLog(entries(1, 1, 1, first=4), snapshot=(meta(5, 1), 0))
    assert log.first_index() == 6 and log.last_index_term() == (6, 1)


# --- release cursor effects and their conditions ----------------------------


def test_release_cursor_effect_snapshots_with_the_cluster_and_machine_version() -> None:
    st = server(S1, log=entries(1, 1, 1, 1, 1, 1))
    st.log.min_snapshot_interval = 2
    st.cfg.machine_versions = [(4, 3), (0, 0)]
    effects = release_cursor.handle_effect(("release_cursor", 5, "s5"), st)
    job = effects[0][1]
    assert job == ("write_snapshot", "snapshot", meta(5, 1, ver=3), "s5")


def test_written_condition_is_stashed_until_the_log_has_written_the_index() -> None:
    st = server(S2, log=entries(1, 1, 1, 1, 1, 1), written=3, term=1)
    st.log.min_snapshot_interval = 2
    effect = ("release_cursor", 5, "s5", {"condition": [("written", 5)]})
    assert release_cursor.handle_effect(effect, st) == []
    assert st.pending_release_cursor == (5, "s5", [("written", 5)])
    _, st, effects = core.handle("follower", ("ra_log_event", ("written", 1, [4])), st)
    assert of_tag(effects, "bg_work") == [] and st.pending_release_cursor is not None
    _, st, effects = core.handle("follower", ("ra_log_event", ("written", 1, [5])), st)
    assert of_tag(effects, "bg_work")[0][1][2]["index"] == 5
    assert st.pending_release_cursor is None


def test_no_snapshot_sends_waits_for_the_transfer_to_finish() -> None:
    st = leader(S1, log=entries(1, 1, 1, 1, 1, 1), term=1)
    st.log.min_snapshot_interval = 2
    core.update_peer(S3, st, status=("sending_snapshot", "pid", 0))
    effect = ("release_cursor", 5, "s5", {"condition": ["no_snapshot_sends"]})
    assert release_cursor.handle_effect(effect, st) == []
    _, st, effects = core.handle("leader", (S3, InstallSnapshotResult(1, 4, 1)), st)
    assert ("demonitor", "process", "pid") in effects
    assert of_tag(effects, "bg_work") and st.pending_release_cursor is None


# --- leader: sending snapshots ----------------------------------------------


def truncated_leader() -> ServerState:
    """A term-2 leader whose log was truncated by a snapshot at 5 (entries 6..8)."""
    st = leader(S1, term=2)
    st.log = MemoryLog(entries(1, 1, 1, first=6), snapshot=(meta(5, 1), 15))
    initialise_peers(st)
    return st


def test_leader_sends_a_snapshot_to_a_peer_behind_its_first_index() -> None:
    st = truncated_leader()
    reply = AppendEntriesReply(2, False, 3, 2, 1)
    _, st, effects = core.handle("leader", (S2, reply), st)
    assert effects == [("send_snapshot", S2, ((5, 1), S1, 2))]
    assert st.cluster[S2].next_index == 3  # entries follow once the snapshot is in
    core.update_peer(S2, st, status=("sending_snapshot", "pid", 0))
    # no AERs to a peer receiving a snapshot
    command = ("command", ("$usr", {"ts": 0}, ("add", 1), "noreply"))
    _, st, effects = core.handle("leader", command, st)
    assert S2 not in [e[1] for e in effects if e[0] in ("send_rpc", "send_snapshot")]
    # the peer confirms the snapshot: replication resumes after it
    _, st, effects = core.handle("leader", (S2, InstallSnapshotResult(2, 5, 1)), st)
    assert st.cluster[S2].status == "normal" and st.cluster[S2].match_index == 5
    aer = next(e[2] for e in effects if e[0] == "send_rpc" and e[1] == S2)
    assert (aer.prev_log_index, aer.prev_log_term) == (5, 1)
    assert [e[0] for e in aer.entries] == [6, 7, 8, 9]


@pytest.mark.parametrize(("attempt", "delay"), [(0, 5000), (1, 10000), (4, 60000)])
def test_a_crashed_sender_backs_off_then_retries(attempt: int, delay: int) -> None:
    st = truncated_leader()
    core.update_peer(S2, st, status=("sending_snapshot", "pid", attempt))
    _, st, effects = core.handle_down("leader", "snapshot_sender", "pid", "timeout", st)
    assert st.cluster[S2].status == ("snapshot_backoff", attempt + 1)
    assert effects == [("start_snapshot_retry_timer", S2, delay)]
    _, st, effects = core.handle("leader", ("snapshot_retry_timeout", S2), st)
    assert effects == [("send_snapshot", S2, ((5, 1), S1, 2))]


def test_a_sender_that_exits_normally_frees_the_peer() -> None:
    st = truncated_leader()
    core.update_peer(S2, st, status=("sending_snapshot", "pid", 0))
    _, st, effects = core.handle_down("leader", "snapshot_sender", "pid", "normal", st)
    assert st.cluster[S2].status == "normal" and effects == []
    _, st, effects = core.handle("leader", ("snapshot_retry_timeout", S2), st)
    assert effects == []


def test_nodeup_ends_disconnected_and_backoff() -> None:
    st = truncated_leader()
    core.update_peer(S2, st, status="disconnected")
    core.update_peer(S3, st, status=("snapshot_backoff", 2))
    core.update_disconnected_peers("n2", "nodeup", st)
    assert st.cluster[S2].status == "normal" and st.cluster[S3].status != "normal"
    core.update_disconnected_peers("n3", "nodeup", st)
    assert st.cluster[S3].status == "normal"


# --- follower: receiving snapshots ------------------------------------------


def rpcs_for(state: object, idx: int = 8, term: int = 2, chunk: int = 3,
             ver: int = 0) -> list[InstallSnapshotRpc]:
    return list(ra_snapshot.install_snapshot_rpcs(meta(idx, 1, ver), state, term, S1, chunk))


def test_chunks_numbering() -> None:
    assert ra_snapshot.chunks(b"abcdefg", 3) == [((1, "next"), b"abc"), ((2, "next"), b"def"),
                                                  ((3, "last"), b"g")]
    assert ra_snapshot.chunks(b"ab", 3) == [((1, "last"), b"ab")]


def test_follower_accepts_installs_and_replies_to_every_chunk() -> None:
    st = server(S3, log=entries(1, 1), term=1)
    rpcs = rpcs_for(36)
    assert len(rpcs) > 1
    role, st, effects = core.handle("follower", rpcs[0], st)
    assert role == "receive_snapshot" and st.current_term == 2 and st.leader_id == S1
    assert effects == [("next_event", rpcs[0]), ("record_leader_msg", S1)]
    result = InstallSnapshotResult(2, 8, 1)
    for rpc in rpcs[:-1]:
        role, st, effects = core.handle(role, rpc, st)
        assert (role, effects) == ("receive_snapshot", [("reply", result)])
    # a resend of an older chunk is ignored but answered
    role, st, effects = core.handle(role, rpcs[0], st)
    assert (role, effects) == ("receive_snapshot", [("reply", result)])
    role, st, effects = core.handle(role, rpcs[-1], st)
    assert role == "follower" and effects == [("reply", result)]
    assert (st.last_applied, st.commit_index, st.machine_state) == (8, 8, 36)
    assert st.log.snapshot_index_term() == (8, 1) and st.log.next_index() == 9
    assert st.log.last_written() == (8, 1)
    assert st.cluster_index_term == (8, 1) and set(st.cluster) == {S1, S2, S3}
    # the leader continues with entries after the snapshot
    aer = AppendEntriesRpc(2, S1, 9, 8, 1, tuple(entries(2, first=9)))
    role, st, _ = core.handle(role, aer, st)
    assert st.log.last_index_term() == (9, 2) and st.last_applied == 9


class Installing(CounterMachine):
    def version(self) -> int:
        return 2

    def snapshot_installed(self, meta, state, old_meta, old_state):  # type: ignore[no-untyped-def]
        return [("send_msg", "observer", (meta["index"], state, old_meta["index"], old_state))]


def test_snapshot_installed_callback_and_machine_version_upgrade() -> None:
    st = server(S3, log=entries(1, 1), term=2, machine=Installing())
    core.handle("follower", AppendEntriesRpc(2, S1, 2, 2, 1, ()), st)
    assert st.last_applied == 2
    rpcs = rpcs_for(36, ver=2)
    role, st, _ = core.handle("follower", rpcs[0], st)
    for rpc in rpcs:  # the first one again, as the next_event
        role, st, effects = core.handle(role, rpc, st)
    assert effects[-1] == ("send_msg", "observer", (8, 36, 2, 3))
    assert st.cfg.effective_machine_version == 2 and st.cfg.machine_versions[0] == (8, 2)


def test_follower_already_past_the_snapshot_tells_the_leader_to_skip_ahead() -> None:
    st = server(S3, log=entries(1, 1, 1, 1, 1, 1, 1, 1, 1), term=2)
    core.handle("follower", AppendEntriesRpc(2, S1, 9, 9, 1, ()), st)
    assert st.last_applied == 9
    role, st, effects = core.handle("follower", rpcs_for(0)[0], st)
    assert role == "follower"
    assert effects == [("reply", AppendEntriesReply(2, False, 10, 9, 1))]


def test_snapshot_with_a_newer_machine_version_is_ignored() -> None:
    st = server(S3, log=entries(1), term=1)
    role, st, effects = core.handle("follower", rpcs_for(0, ver=5)[0], st)
    assert (role, effects) == ("follower", [])


def test_old_term_snapshot_is_refused_with_the_current_term() -> None:
    st = server(S3, log=entries(1), term=3)
    _, _, effects = core.handle("follower", rpcs_for(0)[0], st)
    assert effects == [("reply", InstallSnapshotResult(3, 8, 1))]


def test_a_later_chunk_cannot_start_an_install() -> None:
    st = server(S3, log=entries(1), term=1)
    rpcs = rpcs_for(1234567, chunk=2)
    role, _, effects = core.handle("follower", rpcs[1], st)
    assert role == "follower" and effects[0][0] == "reply"


def receiving() -> tuple[str, ServerState, list[InstallSnapshotRpc]]:
    st = server(S3, log=entries(1, 1, 1), term=1)
    core.handle("follower", AppendEntriesRpc(1, S1, 2, 3, 1, ()), st)
    rpcs = rpcs_for(36)
    role, st, _ = core.handle("follower", rpcs[0], st)
    role, st, _ = core.handle(role, rpcs[0], st)
    assert role == "receive_snapshot"
    return role, st, rpcs


@pytest.mark.parametrize(
    ("msg", "next_event"),
    [
        ("receive_snapshot_timeout", False),
        (AppendEntriesRpc(3, S2, 0, 0, 0, ()), True),
        (RequestVoteRpc(3, S2, 10, 3), True),
    ],
)
def test_install_is_aborted(msg: object, next_event: bool) -> None:
    role, st, rpcs = receiving()
    role, st, effects = core.handle(role, msg, st)
    assert role == "follower" and st.accepting is None
    assert effects == ([("next_event", msg)] if next_event else [])
    assert st.last_applied == 2 and st.log.snapshot_index_term() is None


def test_heartbeats_and_same_term_votes_do_not_abort() -> None:
    role, st, _ = receiving()
    role, st, effects = core.handle(role, HeartbeatRpc(1, 2, S1), st)
    assert (role, effects) == ("receive_snapshot", [])
    role, st, effects = core.handle(role, RequestVoteRpc(2, S2, 10, 3), st)
    assert role == "receive_snapshot" and effects[0][1].vote_granted is False


def test_unexpected_init_restarts_the_receive() -> None:
    role, st, rpcs = receiving()
    init = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "init"), [])
    role, st, effects = core.handle(role, init, st)
    assert role == "follower" and effects == [("next_event", init)]
    role, st, effects = core.handle(role, init, st)
    assert role == "receive_snapshot"
    # an init resets the log to last_applied: live entries will follow
    assert st.log.last_index_term() == (2, 1)


def test_init_then_pre_phase_of_a_live_index_snapshot() -> None:
    # a follower past an init chunk waits for the live entries, and writes those above
    # its last_applied sparsely past its log's end
    st = server(S3, log=entries(1, 1, 1), term=1)
    core.handle("follower", AppendEntriesRpc(1, S1, 2, 3, 1, ()), st)
    init_rpc = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "init"), [])
    role, st, effects = core.handle("follower", init_rpc, st)
    assert (role, st.snapshot_phase) == ("receive_snapshot", "init")
    assert effects == [("next_event", init_rpc), ("record_leader_msg", S1)]
    assert st.log.last_index_term() == (2, 1)  # reset to last_applied
    role, st, effects = core.handle(role, init_rpc, st)
    assert (role, effects) == ("receive_snapshot", [("reply", InstallSnapshotResult(2, 8, 1))])
    pre = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "pre"),
                             [(2, 1, ("usr", {}, 0, "noreply")), (5, 1, ("usr", {}, 1, "noreply"))])
    role, st, effects = core.handle(role, pre, st)
    assert (role, st.snapshot_phase) == ("receive_snapshot", "pre")
    assert effects == [("reply", InstallSnapshotResult(2, 8, 1))]
    # 2 is at last_applied (the follower holds it); 5 is written, leaving a gap
    assert st.log.fetch(5) == (5, 1, ("usr", {}, 1, "noreply"))
    assert st.log.last_index_term() == (5, 1)


def test_the_last_chunk_waits_until_the_live_entries_written_before_it_are_durable() -> None:
    # as Ra: a snapshot is installed above its live entries only once they are
    # written; the held-back call is handled again, and answered, after that
    st = server(S3, log=entries(1, 1, 1), term=1)
    core.handle("follower", AppendEntriesRpc(1, S1, 2, 3, 1, ()), st)
    st.log.handle_event(("written", 1, [1, 2]))
    init_rpc = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "init"), [])
    role, st, effects = core.handle("follower", init_rpc, st)
    role, st, _ = core.handle(role, init_rpc, st)
    pre = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "pre"), [(5, 1, ("usr", {}, 1, "noreply"))])
    role, st, _ = core.handle(role, pre, st)
    ((_, data),) = ra_snapshot.chunks(ra_snapshot.encode_state(7), 1000)
    last = InstallSnapshotRpc(2, S1, meta(8, 1), (1, "last"), data)
    caller = ("call", "the sender")
    role, st, effects = core.handle(role, last, st, None, caller)
    assert (role, effects, st.last_applied) == ("receive_snapshot", [], 2)
    role, st, effects = core.handle(role, ("ra_log_event", ("written", 1, [5])), st)
    assert effects == [("next_event", caller, last)]
    role, st, effects = core.handle(role, last, st, None, caller)
    assert (role, st.last_applied, st.machine_state) == ("follower", 8, 7)
    assert effects[0] == ("reply", InstallSnapshotResult(2, 8, 1))


def test_a_pre_chunk_does_not_start_an_install_on_a_follower() -> None:
    # only init, or a first next/last chunk, starts one; otherwise the leader is
    # told where the follower is (a failed append_entries_reply at last_applied)
    st = server(S3, log=entries(1, 1, 1), term=1)
    core.handle("follower", AppendEntriesRpc(1, S1, 2, 3, 1, ()), st)
    pre = InstallSnapshotRpc(2, S1, meta(8, 1), (0, "pre"), [])
    role, st, effects = core.handle("follower", pre, st)
    assert (role, effects) == ("follower", [("reply", AppendEntriesReply(2, False, 3, 2, 1))])
    assert st.accepting is None


def test_a_failed_snapshot_write_leaves_no_directory_behind(tmp_path: object) -> None:
    # as Ra deletes the pending snapshot's directory when its write fails
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    base = str(tmp_path)
    with pytest.raises(OSError):
        snapshot_store.write(base, snapshot_store.SNAPSHOTS, meta(8, 1), "state", sync=True,
                             fsync=failing_fsync)
    assert os.listdir(os.path.join(base, snapshot_store.SNAPSHOTS)) == []
    assert snapshot_store.recover(base, snapshot_store.SNAPSHOTS) == []


# --- recovery ---------------------------------------------------------


def test_recovery_from_a_snapshot_plus_log() -> None:
    log = MemoryLog(entries(2, 2, first=6), snapshot=(meta(5, 1), 15))
    st2 = core_init(log, last_applied=6)
    assert (st2.last_applied, st2.commit_index, st2.machine_state) == (5, 6, 15)
    assert st2.cluster_index_term == (5, 1) and set(st2.cluster) == {S1, S2, S3}
    core.recover(st2)
    assert st2.last_applied == 6 and st2.machine_state == 15 + 6
    assert not core.is_new(st2)


def core_init(log: MemoryLog, last_applied: int) -> ServerState:
    return init({"id": S2, "initial_members": [S2], "machine": CounterMachine(), "log": log,
                 "rng": random.Random(1), "last_applied": last_applied})


def test_recovery_prefers_a_newer_checkpoint() -> None:
    log = MemoryLog(entries(1, 1, 1, 1, first=6), snapshot=(meta(5, 1), 15),
                    checkpoints=[(meta(8, 1), 99)])
    st = core_init(log, last_applied=9)
    assert (st.last_applied, st.machine_state) == (8, 99)
    core.recover(st)
    assert st.last_applied == 9 and st.machine_state == 99 + 9
