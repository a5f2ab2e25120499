"""`warren ctl` queue, binding and vhost commands as they run on the node.

rabbitmqctl's `list_queues` columns for classic queues, `delete_queue`,
`purge_queue`, `list_bindings`, `list_vhosts`, `add_vhost` and `delete_vhost`, with
rabbitmqctl's answers: a missing queue is `Queue not found` (status 64) for
`delete_queue` and `not_found` (69) for `purge_queue`; an unknown default queue
type is `invalid_queue_type` (69). Queues are reached as a channel reaches
them: classic queues by their process on their home node, quorum queues
through their Ra members.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import actors
from actors import gen_server
from actors.pid import CallExit
from broker import vhost_connections
from broker.ctl_common import EX_UNAVAILABLE, INFO_TIMEOUT, CtlError
from broker.metadata import classic_queues, vhost_metadata
from broker.running import broker_of
from channel.errors import AmqpError
from channel.queue_types.classic.classic_directory import ClassicRecord
from channel.queue_types.queue_type import QUEUE_TYPES

__all__ = ["add_vhost", "classic_consumers", "classic_queue_rows", "delete_queue",
           "delete_vhost", "list_bindings", "list_vhosts", "purge_queue", "select_columns"]

EX_USAGE = 64
#: rabbitmqctl's columns for `list_vhosts` when none are named
VHOST_COLUMNS = ("name",)
BINDING_COLUMNS = ("source_name", "source_kind", "destination_name", "destination_kind",
                   "routing_key", "arguments")


def select_columns(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...],
                   ) -> list[dict[str, Any]]:
    """Each row with only `columns`, in that order (rabbitmqctl's info keys);
    a column no row knows is refused as rabbitmqctl refuses it."""
    if not columns:
        return rows
    known = set().union(*(r.keys() for r in rows)) if rows else set(columns)
    unknown = [col for col in columns if col not in known]
    if unknown:
        raise CtlError(f"Info key(s) {','.join(unknown)} are not supported", EX_USAGE)
    return [{col: r.get(col) for col in columns} for r in rows]


# ------------------------------------------------------------------ queues


def _info(record: ClassicRecord) -> dict[str, Any]:
    """The queue process's counts; empty when its node or process does not answer."""
    try:
        found = gen_server.call(record.pid, ("info",), INFO_TIMEOUT)
    except CallExit:
        return {}
    return found if isinstance(found, dict) else {}


def classic_queue_rows(vhost: str) -> list[dict[str, Any]]:
    """`list_queues` rows of the vhost's classic queues, wherever their processes run."""
    rows = []
    table = classic_queues(broker_of().view.state)
    for (vh, name), r in sorted(table.items()):
        if vh != vhost:
            continue
        info = _info(r)
        rows.append({"name": name, "type": "classic", "durable": r.durable,
                     "auto_delete": r.auto_delete, "exclusive": r.owner is not None,
                     "messages_ready": info.get("messages_ready"),
                     "messages_unacknowledged": info.get("messages_unacknowledged"),
                     "messages": info.get("messages"), "consumers": info.get("consumers"),
                     "leader": r.node, "members": [r.node], "policy": None,
                     "messages_dlx": None, "message_bytes_dlx": None,
                     "state": "running" if info else "down"})
    return rows


def classic_consumers(vhost: str, name: str) -> list[dict[str, Any]]:
    """A classic queue's consumers as its process lists them (tag, channel pid, ack,
    prefetch, priority, exclusive, active); none for a queue not known or not answering."""
    record = classic_queues(broker_of().view.state).get((vhost, name))
    if record is None:
        return []
    try:
        found = gen_server.call(record.pid, ("consumers",), INFO_TIMEOUT)
    except CallExit:
        return []
    return found if isinstance(found, list) else []


def delete_queue(vhost: str, name: str, if_unused: bool = False,
                 if_empty: bool = False) -> str:
    """As `queue.delete` from a channel; an operator may delete an exclusive queue."""
    with _session(vhost, name) as session:
        if not session.exists(name):
            raise CtlError("Queue not found", EX_USAGE)
        count = session.delete(name, if_unused=if_unused, if_empty=if_empty)
    return f"Queue was successfully deleted with {count} ready messages"


def purge_queue(vhost: str, name: str) -> str:
    with _session(vhost, name) as session:
        if not session.exists(name):
            raise CtlError("not_found", EX_UNAVAILABLE)
        session.purge(name)
    return ""


@contextmanager
def _session(vhost: str, name: str) -> Iterator[Any]:
    """A queue session of the node's backend for this operator's process, acting as
    the owner of the queue if it is exclusive."""
    record = classic_queues(broker_of().view.state).get((vhost, name))
    owner = record.owner if record is not None else None
    session = broker_of().backend.session(actors.self(), vhost, owner, "rabbitmqctl")
    try:
        yield session
    finally:
        session.close()


# ---------------------------------------------------------------- bindings


def list_bindings(vhost: str = "/", columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every queue's binding to the default exchange, then the declared bindings."""
    state = broker_of().view.state
    names = sorted({n for vh, n in state.queues if vh == vhost}
                   | {n for vh, n in classic_queues(state) if vh == vhost})
    rows: list[dict[str, Any]] = [
        {"source_name": "", "source_kind": "exchange", "destination_name": n,
         "destination_kind": "queue", "routing_key": n, "arguments": []} for n in names]
    vh = state.topology.vhosts.get(vhost)
    if vh is not None:
        for source in sorted(vh.bindings):
            for b in sorted(vh.bindings[source],
                            key=lambda b: (b.kind, b.destination, b.key)):
                rows.append({"source_name": source, "source_kind": "exchange",
                             "destination_name": b.destination, "destination_kind": b.kind,
                             "routing_key": b.key,
                             "arguments": [[k, v] for k, v in b.arguments]})
    return select_columns(rows, columns or BINDING_COLUMNS)


# ------------------------------------------------------------------ vhosts


def list_vhosts(columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    state = broker_of().view.state
    rows = []
    for vhost in state.vhosts:
        meta = vhost_metadata(state, vhost)
        rows.append({"name": vhost,
                     "default_queue_type": meta.get("default_queue_type", "undefined"),
                     "description": meta.get("description", ""),
                     "tags": list(meta.get("tags", ()))})
    return select_columns(rows, columns or VHOST_COLUMNS)


def add_vhost(vhost: str, default_queue_type: str | None = None,
              description: str | None = None, tags: str | None = None) -> str:
    """A vhost that exists already is left as it is, as rabbitmqctl's."""
    if default_queue_type is not None and default_queue_type not in QUEUE_TYPES:
        raise CtlError("invalid_queue_type", EX_UNAVAILABLE)
    meta: dict[str, Any] = {}
    if default_queue_type is not None:
        meta["default_queue_type"] = default_queue_type
    if description:
        meta["description"] = description
    if tags:
        meta["tags"] = [t.strip() for t in tags.split(",") if t.strip()]
    try:
        broker_of().metadata.command(("add_vhost", vhost, meta))
    except AmqpError as exc:
        raise CtlError(f"{exc.name} - {exc.explanation}") from None
    return ""


def delete_vhost(vhost: str) -> str:
    """Every queue of the vhost is deleted (its processes and Ra clusters stopped,
    its consumers cancelled), then the vhost goes from the metadata store with its
    exchanges, bindings, policies, limits and permissions, and every node closes
    its connections to it (`vhost_connections`), in `rabbit_vhost:delete`'s order."""
    state = broker_of().view.state
    if vhost not in state.vhosts:
        raise CtlError(f"Virtual host '{vhost}' does not exist")
    names = sorted({n for vh, n in state.queues if vh == vhost}
                   | {n for vh, n in classic_queues(state) if vh == vhost})
    for name in names:
        with _session(vhost, name) as session:
            try:
                session.delete(name, if_unused=False, if_empty=False)
            except AmqpError:
                pass  # (a queue whose home node is down) its record goes with the vhost
    try:
        broker_of().metadata.command(("delete_vhost", vhost))
    except AmqpError:
        raise CtlError(f"Virtual host '{vhost}' does not exist") from None
    vhost_connections.close_everywhere(vhost)
    return ""
