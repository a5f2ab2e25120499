"""libzmq's own threads run with the batch scheduling policy where the OS has it.

A send from the hub wakes libzmq's I/O thread; as a normal thread it would preempt
the hub on the hub's core, as a batch thread it waits for an idle core or for the
hub to block (`transports.zmq_io.IO_THREAD_POLICY`). ``WARREN_ZMQ_IO_SCHED``
overrides the policy for measurements.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest

from tests.waiting import wait_until
from transports import zmq_io
from transports.zmq_io import IO_SCHED_ENV, IoLoop, io_thread_policy, new_context
from transports.zmq_node import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="thread policies are read from Linux's /proc")


def _zmq_threads() -> set[int]:
    """Thread ids of this process's libzmq threads (named ``ZMQbg/...``)."""
    found = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("ZMQbg/"):
                    found.add(int(tid))
        except OSError:
            continue
    return found


Closer = Callable[[], None]


def _policies_of_new_threads(make: Callable[[], Closer]) -> list[int]:
    """The policies of the libzmq threads `make` starts; its result closes them."""
    before = _zmq_threads()
    closer = make()
    try:
        # libzmq names each thread from inside it, so a loaded machine may show the
        # new threads under their old name for a moment: wait for the names
        new = wait_until(lambda: _zmq_threads() - before,
                         "a context with a socket starting its threads", 30.0)
        return [os.sched_getscheduler(tid) for tid in sorted(new)]
    finally:
        closer()


def _context_with_a_socket() -> Closer:
    ctx = new_context()
    sock = ctx.socket(zmq_io.zmq.PAIR)

    def close() -> None:
        sock.close(0)
        ctx.term()
    return close


def test_the_threads_of_a_new_context_are_batch_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IO_SCHED_ENV, raising=False)
    assert io_thread_policy() == os.SCHED_BATCH
    assert set(_policies_of_new_threads(_context_with_a_socket)) == {os.SCHED_BATCH}


def test_a_node_s_socket_layer_uses_such_a_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IO_SCHED_ENV, raising=False)

    def loop() -> Closer:
        io = IoLoop("s@127.0.0.1:1", 1, b"cookie", f"tcp://127.0.0.1:{free_port()}", 1.0,
                    lambda: None)
        return io._shutdown
    assert set(_policies_of_new_threads(loop)) == {os.SCHED_BATCH}


def test_the_environment_can_leave_them_normal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IO_SCHED_ENV, "other")
    assert set(_policies_of_new_threads(_context_with_a_socket)) == {os.SCHED_OTHER}


def test_a_policy_the_process_may_not_take_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # libzmq would abort its thread on a refused policy: a sandbox that refuses it
    # leaves the threads as the OS starts them
    monkeypatch.delenv(IO_SCHED_ENV, raising=False)

    def refuse(pid: int, policy: int, param: os.sched_param) -> None:
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    zmq_io.policy_allowed.cache_clear()
    try:
        assert not zmq_io.policy_allowed(os.SCHED_BATCH)
        assert set(_policies_of_new_threads(_context_with_a_socket)) == {os.SCHED_OTHER}
    finally:
        zmq_io.policy_allowed.cache_clear()


def test_an_unknown_policy_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IO_SCHED_ENV, "fifo")
    with pytest.raises(ValueError, match="WARREN_ZMQ_IO_SCHED='fifo'"):
        new_context()
