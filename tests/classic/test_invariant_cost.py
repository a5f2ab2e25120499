"""Which invariants a classic queue checks after every command, and where.

The core checks its own invariants after every command. The ones whose cost is
fixed, or grows with the consumers, always run. The walk over every unacked
message (each one is a message the queue holds) grows with the consumers'
prefetch: the core's own tests run it (`deep_checks`, the default), while a queue
process, which applies a command for every publish, ack and `notify_sent`, leaves it
out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from actors.clock import ManualClock
from classic import ClassicQueue, QueueConfig
from classic import commands as c
from classic import process as queue_process
from classic.process import QueueEnv
from classic.queue_sup import start_queue, start_queue_sup
from tests.classic.helpers import CH1, Q


def _swap_an_unacked_id_for_one_the_queue_does_not_hold(q: Q) -> None:
    """Corrupt the state so that only the per-message walk can see it: the counts
    still add up."""
    record = q.queue.consumers.channels[CH1]
    real = next(iter(record.unacked))
    record.unacked[10_000] = record.unacked.pop(real)


def test_the_core_walks_every_unacked_message_after_a_command_by_default() -> None:
    q = Q()
    q.consume(CH1, "ctag", prefetch=10)
    q.publish_all("a", "b")
    _swap_an_unacked_id_for_one_the_queue_does_not_hold(q)
    with pytest.raises(AssertionError):
        q.do(c.Stat())


def test_without_deep_checks_the_core_skips_only_the_per_message_walk() -> None:
    q = Q()
    q.queue = ClassicQueue(QueueConfig("q"), 0, deep_checks=False)
    q.consume(CH1, "ctag", prefetch=10)
    q.publish_all("a", "b")
    _swap_an_unacked_id_for_one_the_queue_does_not_hold(q)
    q.do(c.Stat())  # not walked
    # the counts are still checked: an unacked id too many fails at once
    q.queue.consumers.channels[CH1].unacked[20_000] = None
    with pytest.raises(AssertionError):
        q.do(c.Stat())


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node("classic@127.0.0.1:1", clock=ManualClock()).start()
    yield n
    n.stop()


def test_a_queue_process_runs_its_core_without_the_per_message_walk(
        node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[bool] = []

    class Recorded(ClassicQueue):
        def __init__(self, config: QueueConfig, now: int, **kw: Any) -> None:
            super().__init__(config, now, **kw)
            made.append(self.deep_checks)

    monkeypatch.setattr(queue_process, "ClassicQueue", Recorded)
    with node.attached():
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        result = start_queue(None, QueueConfig("q"), QueueEnv())
        assert result[0] == "ok", result
        assert gen_server.call(result[1], c.Stat(), 5000).message_count == 0
    assert made == [False]
