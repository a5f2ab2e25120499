"""The server loop lets the processes it just sent ``applied`` events run first.

In Erlang the channel that receives an ``applied`` event runs at once on
another scheduler and confirms to its client while the Ra server goes on with
its mailbox. Every process of a warren node shares one gevent hub, so the
loop yields once after an event that sent ``applied`` events: the woken
processes run before the server takes its next event, instead of after it
has drained everything queued behind.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gevent
import pytest

import actors
from actors import Node
from ra.proc import RaServerProc
from ra.proc_effects import send_applied_notifications
from ra.statem import CAST


class _Stop(Exception):
    pass


class _Queued:
    """An event source holding a fixed list of events, then stopping the loop."""

    def __init__(self, events: list[tuple[Any, Any]]) -> None:
        self._events = deque(events)

    def take(self) -> tuple[Any, Any]:
        if not self._events:
            raise _Stop()
        return self._events.popleft()


def _server(events: list[tuple[Any, Any]], handle: Any) -> RaServerProc:
    """A server shell whose loop runs `handle` for each of `events` and nothing else."""
    proc = RaServerProc.__new__(RaServerProc)
    proc.role = "leader"
    proc.notified = False
    proc.events = _Queued(events)  # type: ignore[assignment]
    proc.handle_event = handle  # type: ignore[method-assign]
    proc.after_event = lambda: None  # type: ignore[method-assign]
    return proc


def _run(proc: RaServerProc) -> None:
    with pytest.raises(_Stop):
        proc.loop()


def test_processes_woken_by_applied_events_run_before_the_next_event() -> None:
    order: list[str] = []

    def handle(_evtype: Any, msg: Any) -> None:
        order.append(msg)
        if msg == "commit":
            gevent.spawn(order.append, "channel")  # the channel the event woke
            proc.notified = True

    proc = _server([(CAST, "commit"), (CAST, "next")], handle)
    _run(proc)
    assert order == ["commit", "channel", "next"]
    assert proc.notified is False


def test_without_applied_events_the_server_takes_its_next_event_at_once() -> None:
    order: list[str] = []

    def handle(_evtype: Any, msg: Any) -> None:
        order.append(msg)
        if msg == "append":
            gevent.spawn(order.append, "other")

    proc = _server([(CAST, "append"), (CAST, "next")], handle)
    _run(proc)
    gevent.sleep(0)
    assert order == ["append", "next", "other"]


def test_sending_applied_events_marks_the_event_and_an_empty_notify_does_not(
    node: Node,
) -> None:
    with node.attached():
        proc = RaServerProc.__new__(RaServerProc)
        proc.id = ("q", node.name)
        proc.pending_notifys = {}
        proc.notified = False
        proc.ra_event_formatter = None
        send_applied_notifications(proc, {})
        assert proc.notified is False
        client = actors.self()
        send_applied_notifications(proc, {client: [("corr", "ok")]})
        assert proc.notified is True
        assert actors.receive(1000) == ("ra_event", proc.id, ("applied", [("corr", "ok")]))
