"""A node whose message store syncs before it confirms (RabbitMQ 3.10's rule) keeps
running during the sync.

The sync takes the disk's time. The store waits for it on the hub's thread pool, so
the node's other processes (its queues and their channels) go on meanwhile, and
what they send the store makes its next batch. The confirm still comes only after
the sync.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from actors import Node
from classic import effects as e
from classic.msg_store import STORE, start_link
from classic.queue_sup import start_queue_sup
from tests.classic.test_msg_store import _durable_queue, _publish, _records
from tests.classic.test_process import event

GUARD_S = 5.0  # only so that a hub blocked by the sync cannot hang the test


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node("store@127.0.0.1:1").start()
    yield n
    n.stop()


def test_the_node_runs_its_other_processes_while_the_store_syncs(
        node: Node, tmp_path: Path) -> None:
    syncing = threading.Event()
    released = threading.Event()
    released_during_sync: list[bool] = []

    def fsync(_fd: int) -> None:
        syncing.set()
        # only a process on the node's hub releases it
        released_during_sync.append(released.wait(GUARD_S))

    def releaser() -> None:
        while not syncing.is_set():
            actors.sleep(1)
        released.set()

    with node.attached():
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        assert start_link(str(tmp_path / "store"), STORE, fsync=fsync)[0] == "ok"
        q, store = _durable_queue()
        actors.spawn(releaser)
        _publish(q, 1, "a")
        assert event(e.Confirm).seqs == (1,)
        assert released_during_sync == [True]
        assert _records(tmp_path, store) == [1]
