"""The node's message store with real queue processes: a persistent message in a
durable queue is confirmed once its record is in the queue's file, removals follow
it, files and directories are owner-only, and a deleted queue leaves nothing."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from classic import QueueConfig
from classic import commands as c
from classic import effects as e
from classic.msg_store import (
    MSG_STORE_CREDIT,
    STORE,
    STORE_CREDIT,
    QueueStore,
    open_queue,
    recover,
    start_link,
)
from classic.process import BUMP_CREDIT, CLASSIC_EVENT, CREDIT, FLOW, QueueProcess, QueueState
from classic.queue import ClassicQueue
from classic.queue_sup import start_queue, start_queue_sup
from classic.store_log import replay
from tests.classic.test_process import WAIT, event, reporting_env, wait_exit


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node("store@127.0.0.1:1").start()
    yield n
    n.stop()


@pytest.fixture
def fsyncs() -> list[int]:
    return []


@pytest.fixture
def me(node: Node, tmp_path: Path, fsyncs: list[int]) -> Iterator[actors.Process]:
    with node.attached() as proc:
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        assert start_link(str(tmp_path / "store"), STORE, fsync=fsyncs.append)[0] == "ok"
        yield proc


def _durable_queue(name: str = "q") -> tuple[Any, QueueStore]:
    store = open_queue(STORE, "/", name, {"name": name}, lambda content: content.encode())
    result = start_queue(None, QueueConfig(name, durable=True), reporting_env(), store)
    assert result[0] == "ok", result
    return result[1], store


def _records(root: Path, store: QueueStore) -> list[int]:
    return [m.msg_id for m in replay((root / "store" / store.qdir / "log").read_bytes())[0]]


def _publish(q: Any, seq: int, body: str) -> None:
    gen_server.cast(q, c.Deliver(actors.self(), seq, "ex", ("rk",), len(body),
                                 persistent=True, content=body))


def test_the_confirm_comes_once_the_record_is_in_the_file(me: actors.Process,
                                                         tmp_path: Path) -> None:
    q, store = _durable_queue()
    _publish(q, 1, "a")
    assert event(e.Confirm).seqs == (1,)
    assert _records(tmp_path, store) == [1]
    mode = stat.S_IMODE((tmp_path / "store" / store.qdir / "log").stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE((tmp_path / "store" / store.qdir).stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o700


def test_a_message_that_leaves_is_removed_and_a_deleted_queue_leaves_no_files(
        me: actors.Process, tmp_path: Path) -> None:
    q, store = _durable_queue()
    _publish(q, 1, "a")
    _publish(q, 2, "b")
    event(e.Confirm)
    reply = gen_server.call(q, c.BasicGet(me.pid, ack_required=True))
    gen_server.cast(q, c.Ack(me.pid, (reply.delivery.msg_id,)))
    gen_server.call(q, ("info",))  # the ack is handled, its removal sent to the store
    (stored,) = recover(STORE)
    assert [m.msg_id for m in stored.messages] == [2]
    assert gen_server.call(q, c.Delete()) == e.Ok(message_count=1)
    wait_exit(q)
    assert recover(STORE) == []
    assert not (tmp_path / "store" / store.qdir).exists()


def test_a_queue_file_is_emptied_once_every_message_in_it_has_left(
        me: actors.Process, tmp_path: Path) -> None:
    q, store = _durable_queue()
    for seq in range(1, 4):
        _publish(q, seq, "abc")
    event(e.Confirm)
    gen_server.call(q, c.Purge())
    assert recover(STORE)[0].messages == []  # a call: what was cast before is written
    assert (tmp_path / "store" / store.qdir / "log").stat().st_size == 0


def test_the_store_syncs_each_file_it_wrote_when_asked_to(me: actors.Process,
                                                          fsyncs: list[int]) -> None:
    q, _store = _durable_queue()
    synced_at_open = len(fsyncs)
    _publish(q, 1, "a")
    event(e.Confirm)
    assert len(fsyncs) == synced_at_open + 1


def _flow_publish(q: Any, channel: Any, size: int) -> None:
    gen_server.cast(q, (FLOW, c.Deliver(channel, None, "ex", ("rk",), size, persistent=True,
                                        content="x")))


def _grants() -> int:
    """How many credit grants the queue has sent this process so far."""
    count = 0
    while actors.receive(0, match=lambda m: type(m) is tuple and len(m) == 5
                         and m[0] == CLASSIC_EVENT and m[4] == (BUMP_CREDIT, CREDIT[1])) \
            is not actors.TIMEOUT:
        count += 1
    return count


def test_a_queue_out_of_store_credit_holds_back_its_publishers_grants(
        me: actors.Process) -> None:
    """The test is the store: it takes the queue's writes and grants nothing until told.
    Each large body (4096 bytes and more) spends one of the queue's 4000 credits."""
    initial, more = MSG_STORE_CREDIT
    store = QueueStore(me.pid, "qdir", lambda content: content.encode())
    result = start_queue(None, QueueConfig("q", durable=True), reporting_env(), store)
    assert result[0] == "ok", result
    q = result[1]
    for _ in range(initial):
        _flow_publish(q, me.pid, 4096)
    gen_server.call(q, ("info",))
    assert _grants() == initial // CREDIT[1]  # granted while the store had credit left
    for _ in range(CREDIT[1]):
        _flow_publish(q, me.pid, 10)
    gen_server.call(q, ("info",))
    assert _grants() == 0  # deferred: the queue is blocked by its store
    actors.send(q, (STORE_CREDIT, more))
    gen_server.call(q, ("info",))
    assert _grants() == 1


def test_the_store_grants_its_queues_more_credit_as_it_writes(me: actors.Process) -> None:
    q, _store = _durable_queue()
    initial, more = MSG_STORE_CREDIT
    total = initial + more
    for _ in range(total):
        _flow_publish(q, me.pid, 4096)
    for _ in range(total // CREDIT[1]):  # every grant comes, none held back for good
        grant = actors.receive(WAIT, match=lambda m: type(m) is tuple and len(m) == 5
                               and m[0] == CLASSIC_EVENT and m[4] == (BUMP_CREDIT, CREDIT[1]))
        assert grant is not actors.TIMEOUT


def test_a_queue_whose_declare_cannot_be_read_is_left_alone(me: actors.Process,
                                                            tmp_path: Path) -> None:
    _q, store = _durable_queue("good")
    broken = tmp_path / "store" / "0123-broken"
    broken.mkdir(mode=0o700)
    (broken / "meta").write_bytes(b"not a declare")
    assert [s.qdir for s in recover(STORE)] == [store.qdir]
    assert (broken / "meta").exists()


def test_a_publishing_channel_that_dies_is_forgotten(me: actors.Process) -> None:
    """The shell run by this process: it watches a channel from its first flow publish,
    and that channel's DOWN drops its credit counter."""
    shell = QueueProcess()
    state = QueueState(ClassicQueue(QueueConfig("q"), 0), reporting_env(), {})
    channel = actors.spawn(lambda: actors.receive())
    shell._credit_ack(state, channel)
    assert channel in state.credit_to
    actors.exit(channel, "kill")
    down = actors.receive(WAIT, match=lambda m: type(m) is tuple and m[0] == "DOWN")
    assert down is not actors.TIMEOUT
    shell.handle_info(down, state)
    assert state.credit_to == {} and state.senders == {}


def test_a_queue_rereads_its_file_after_everything_sent_before_is_written(
        me: actors.Process) -> None:
    """What a queue process restarted after a crash starts from."""
    store = open_queue(STORE, "/", "q", {"name": "q"}, lambda content: content.encode())
    store.write(tuple(e.Delivery(i, False, "ex", ("rk",), 1, True, 0, None, body)
                      for i, body in ((1, "a"), (2, "b"), (3, "c"))))
    store.remove((2,))
    assert [(m.msg_id, m.content) for m in store.reread()] == [(1, b"a"), (3, b"c")]
