"""A leader appends a run of waiting normal-priority commands as one batch.

Commands that are already queued behind each other in the leader's mailbox go
into the log together (one WAL write, one ``append_entries_rpc`` per
follower), yet the log, the replies and their order are exactly those of
appending them one by one; any other event in the run keeps its place.
Ra's per-server counters (``commands``, ``command_flushes``,
``aer_received_follower``, ``rpcs_sent``) in the overview show the batching.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen
from ra import api
from ra.machine import Machine
from ra.types import USR
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    leader_of,
    overview,
    wait_until,
)


class Journal(Machine):
    """Keeps every command with the index it was applied at."""

    def init(self, config: dict[str, Any]) -> Any:
        return ()

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return ((*state, (meta["index"], command)), ("applied", command))


def start(c: Cluster) -> tuple[str, str]:
    result = api.start_cluster("default", "batching", Journal(), c.ids,
                               server_config=SERVER_CONFIG)
    assert result[0] == "ok", result
    return leader_of(c.ids)


def journal(sid: tuple[str, str]) -> tuple[Any, ...]:
    return overview(sid)["machine"]


def applied_correlations(expected: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < expected:
        msg = actors.receive(10_000)
        assert msg is not actors.TIMEOUT, f"only {len(got)} of {expected} applied"
        match msg:
            case ("ra_event", _, ("applied", replies)):
                got.extend(corr for corr, _ in replies)
            case _:
                raise AssertionError(f"unexpected {msg!r}")
    return got


def test_waiting_commands_share_a_batch_and_keep_order_and_replies(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        before = overview(leader)["counters"]
        # sent without yielding: all 300 are in the leader's mailbox before it runs
        for i in range(300):
            api.pipeline_command(leader, ("c", i), i, "normal")
        assert applied_correlations(300) == list(range(300))
        entries = [e for e in journal(leader) if e[1][0] == "c"]
        assert [cmd for _, cmd in entries] == [("c", i) for i in range(300)]
        indexes = [idx for idx, _ in entries]
        assert indexes == list(range(indexes[0], indexes[0] + 300))
        after = overview(leader)["counters"]
        assert after["commands"] - before["commands"] == 300
        flushes = after["command_flushes"] - before["command_flushes"]
        assert 1 <= flushes < 300 // 10
        for sid in cluster.ids:
            wait_until(lambda sid=sid: journal(sid) == journal(leader),
                       what=f"{sid} applies the same journal")
        followers = [sid for sid in cluster.ids if sid != leader]
        # one append_entries_rpc per batch, not one per command
        assert all(overview(f)["counters"]["aer_received_follower"] < 100 for f in followers)


def test_another_event_in_the_run_keeps_its_place(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        for i in range(3):
            api.pipeline_command(leader, ("c", i), i, "normal")
        # a synchronous command, queued between the casts (its reply comes later)
        req = gen.send_request(leader, ("leader_call", ("command", "normal",
                                                         (USR, ("call", 3), "await_consensus"))))
        for i in range(4, 7):
            api.pipeline_command(leader, ("c", i), i, "normal")
        # and a low-priority one, which Ra queues behind the mailbox
        api.pipeline_command(leader, ("low", 7), 7, "low")
        assert applied_correlations(7) == [0, 1, 2, 4, 5, 6, 7]
        kind, reply = gen.wait_response(req, 10_000)
        assert kind == "reply" and reply[:2] == ("ok", ("applied", ("call", 3))), reply
        commands = [cmd for _, cmd in journal(leader) if cmd[0] in ("c", "call", "low")]
        assert commands == [("c", 0), ("c", 1), ("c", 2), ("call", 3),
                            ("c", 4), ("c", 5), ("c", 6), ("low", 7)]


def test_a_bad_reply_mode_in_the_run_is_dropped_alone(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        api.pipeline_command(leader, ("c", 0), 0, "normal")
        actors.send(leader, ("$gen_cast", ("command", "normal", (USR, ("bad", 1), "bogus"))))
        api.pipeline_command(leader, ("c", 2), 2, "normal")
        assert applied_correlations(2) == [0, 2]
        commands = [cmd for _, cmd in journal(leader) if cmd[0] in ("c", "bad")]
        assert commands == [("c", 0), ("c", 2)]
