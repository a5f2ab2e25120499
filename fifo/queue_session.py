"""A process that owns one `rabbit_fifo_client` session and runs it against Ra.

The session logic is pure (`fifo.client`); something has to be the ``self()``
whose pid the queue monitors, receive the ``ra_event``s and carry out the
session's effects with `ra.api`. In RabbitMQ that is the channel; this process
does the same job for one queue, so the queue can be driven and observed before
the channel exists. Both run the session through `fifo.client_owner`. Whatever
the session hands back for the channel -- confirms, deliveries, flow control --
goes to the owner as ``("queue_actions", session_pid, actions)``.

Requests are ``gen_server`` calls: ``("enqueue", correlation, msg)``,
``("checkout", tag, prefetch, meta)``, ``("settle" | "return" | "discard", tag,
msg_ids)``, ``("cancel", tag, reason)`` and ``"state"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import actors
from actors import gen_server
from fifo import client, client_owner
from fifo.client_effects import Out
from fifo.client_records import ClientState, init

__all__ = ["QueueSession", "call", "start"]


@dataclass
class _State:
    qname: Any
    owner: Any
    session: ClientState
    timers: dict[str, Any] = field(default_factory=dict)


def start(servers: Sequence[Any], qname: Any, owner: Any) -> Any:
    """Start a session process on the caller's node; ``("ok", pid)``."""
    return gen_server.start(QueueSession, (list(servers), qname, owner))


def call(pid: Any, request: Any, timeout: int = 10_000) -> Any:
    return gen_server.call(pid, request, timeout)


class QueueSession(gen_server.GenServer):
    """The channel's share of one quorum queue: a client session and its effects."""

    def init(self, args: Any) -> Any:
        servers, qname, owner = args
        session = init(servers, actors.self(), node=actors.node())
        return ("ok", _State(qname, owner, session))

    def handle_call(self, request: Any, from_: Any, st: _State) -> Any:
        q = st.qname
        match request:
            case ("enqueue", corr, msg):
                out = self._drive(st, lambda r: client.enqueue(q, corr, msg, st.session, r))
                return ("reply", out.tag, st)
            case ("checkout", tag, prefetch, meta):
                out = self._drive(st, lambda r: client.checkout(
                    tag, ("simple_prefetch", prefetch), meta, st.session, r))
                return ("reply", (out.tag, out.result), st)
            case ("settle" | "return" | "discard" as kind, tag, msg_ids):
                op = {"settle": client.settle, "return": client.return_,
                      "discard": client.discard}[kind]
                out = self._drive(st, lambda _r: op(tag, msg_ids, st.session))
                return ("reply", out.tag, st)
            case ("cancel", tag, reason):
                out = self._drive(st, lambda r: client.cancel_checkout(tag, reason,
                                                                      st.session, r))
                return ("reply", out.tag, st)
            case "state":
                return ("reply", st.session, st)
        return ("reply", ("error", ("unknown_request", request)), st)

    def handle_info(self, msg: Any, st: _State) -> Any:
        match msg:
            case ("ra_event", from_, evt):
                self._event(st, from_, evt)
        return ("noreply", st)

    def handle_cast(self, msg: Any, st: _State) -> Any:
        match msg:
            case ("queue_event", _qname, (from_, evt)):
                st.timers.pop("slow", None)
                self._event(st, from_, evt)
        return ("noreply", st)

    def _event(self, st: _State, from_: Any, evt: Any) -> None:
        out = self._drive(st, lambda r: client.handle_ra_event(st.qname, from_, evt,
                                                               st.session, r))
        if out.tag == "protocol_error":
            raise RuntimeError(("protocol_error", out.result))

    # --- the effect loop ---------------------------------------------------------------------

    def _drive(self, st: _State, op: Callable[[Sequence[Any]], Out]) -> Out:
        """Run a client operation to completion, then hand its actions to the owner."""
        out = client_owner.drive(op, st.timers)
        st.session = out.state
        if out.actions:
            actors.send(st.owner, ("queue_actions", actors.self(), out.actions))
        return out
