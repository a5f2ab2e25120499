"""How a leader orders the commands one client sends it: Ra's two priorities.

A ``normal`` command (a synchronous ``process_command``, a pipelined command
sent with ``normal``, a command an aux handler appends) is appended when the
leader takes it from its mailbox. A ``low`` one (``pipeline_command`` by
default: RabbitMQ's enqueues) is held back: the leader puts it in a queue and
sends itself ``flush_commands``, which lands behind everything already in its
mailbox, and each flush appends at most ``low_priority_commands_flush_size``
(16) of them. So a low command is overtaken by the normal commands that were
already queued behind it when the leader took it; that is the only reordering
between one client's commands.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen
from ra import api
from ra.machine import Machine
from ra.types import USR
from tests.ra.ra_proc_support import SERVER_CONFIG, Cluster, leader_of, overview


class Journal(Machine):
    """Keeps every user command in log order; its aux handler appends what it is cast."""

    def init(self, config: dict[str, Any]) -> Any:
        return ()

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return ((*state, command), ("applied", command))

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: Any,
                   int_state: Any) -> tuple[Any, ...]:
        match cmd:
            case ("append", inner, corr, pid):
                return ("no_reply", aux, int_state, [("append", inner, ("notify", corr, pid))])
        return ("no_reply", aux, int_state, [])


def start(c: Cluster) -> tuple[str, str]:
    result = api.start_cluster("default", "priority", Journal(), c.ids,
                               server_config=SERVER_CONFIG)
    assert result[0] == "ok", result
    return leader_of(c.ids)


def call(leader: tuple[str, str], cmd: Any) -> Any:
    """A synchronous command sent without waiting for its reply."""
    return gen.send_request(leader, ("leader_call", ("command", "normal",
                                                     (USR, cmd, "await_consensus"))))


def replied(req: Any) -> Any:
    kind, reply = gen.wait_response(req, 10_000)
    assert kind == "reply", reply
    return reply


def applied(expected: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < expected:
        msg = actors.receive(10_000)
        assert msg is not actors.TIMEOUT, f"only {len(got)} of {expected} applied"
        match msg:
            case ("ra_event", _, ("applied", replies)):
                got.extend(corr for corr, _ in replies)
    return got


def journal(leader: tuple[str, str], kinds: tuple[str, ...]) -> list[Any]:
    return [cmd for cmd in overview(leader)["machine"] if cmd[0] in kinds]


def test_a_low_priority_command_goes_behind_what_was_already_in_the_mailbox(
        cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        # one client, no yield in between: all four are in the leader's mailbox
        api.pipeline_command(leader, ("enqueue", 1), 1, "low")
        api.pipeline_command(leader, ("settle", 2), 2, "normal")
        req = call(leader, ("dequeue", 3))
        api.pipeline_command(leader, ("settle", 4), 4, "normal")
        replied(req)
        assert sorted(applied(3)) == [1, 2, 4]
        assert journal(leader, ("enqueue", "settle", "dequeue")) == [
            ("settle", 2), ("dequeue", 3), ("settle", 4), ("enqueue", 1)]


def test_pipeline_command_defaults_to_low_priority(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        api.pipeline_command(leader, ("enqueue", 1), 1)
        req = call(leader, ("dequeue", 2))
        replied(req)
        applied(1)
        assert journal(leader, ("enqueue", "dequeue")) == [("dequeue", 2), ("enqueue", 1)]


def test_low_priority_commands_are_appended_in_batches_of_sixteen(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        before = overview(leader)["counters"]
        for i in range(40):
            api.pipeline_command(leader, ("enqueue", i), i, "low")
        assert applied(40) == list(range(40))
        after = overview(leader)["counters"]
        assert after["commands"] - before["commands"] == 40
        assert after["command_flushes"] - before["command_flushes"] == 3  # 16 + 16 + 8
        assert journal(leader, ("enqueue",)) == [("enqueue", i) for i in range(40)]


def test_what_an_aux_handler_appends_comes_before_the_next_message(cluster: Cluster) -> None:
    """RabbitMQ's returns go through the leader's aux handler, which appends them
    at once: a ``basic.get`` sent right after a requeue is appended after it."""
    with cluster.nodes[0].attached():
        leader = start(cluster)
        api.cast_aux_command(leader, ("append", ("return", 1), 1, actors.self()))
        req = call(leader, ("dequeue", 2))
        replied(req)
        applied(1)
        assert journal(leader, ("return", "dequeue")) == [("return", 1), ("dequeue", 2)]
