"""Run broker functions in a process of the node from an HTTP request's greenlet.

`broker.ctl_ops` functions receive replies in their mailbox, so they must run in an
Erlang-style process; a request handler is a plain greenlet. `in_node` spawns a
process for the call and waits for its result on the hub without blocking it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gevent.event import AsyncResult

from actors import Node

__all__ = ["CALL_TIMEOUT_S", "in_node"]

T = TypeVar("T")
CALL_TIMEOUT_S = 30.0


def in_node(node: Node, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a new process of `node`; its exception is raised here."""
    done: AsyncResult = AsyncResult()

    def run() -> None:
        try:
            done.set(fn(*args))
        except BaseException as exc:  # handed to the waiting request
            done.set_exception(exc)

    node.spawn(run, ())
    return done.get(timeout=CALL_TIMEOUT_S)
