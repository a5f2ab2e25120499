"""Command records of ``rabbit_fifo`` and the ``make_*`` constructors.

Each record is a NamedTuple whose first field is the record name, so a command
compares equal to (and pattern-matches like) the plain Erlang-shaped tuple,
e.g. ``Settle("settle", 3, [0]) == ("settle", 3, [0])``. Builtin commands that
Ra delivers (``down``, ``nodeup``, ``timeout``, ...) are plain tuples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from fifo import mc

__all__ = [
    "Checkout",
    "Credit",
    "Discard",
    "E",
    "Enqueue",
    "GarbageCollection",
    "Modify",
    "Purge",
    "PurgeNodes",
    "RegisterEnqueuer",
    "Requeue",
    "Return",
    "Settle",
    "UpdateConfig",
    "get_msg",
    "make_checkout",
    "make_credit",
    "make_discard",
    "make_dlx_checkout",
    "make_dlx_settle",
    "make_enqueue",
    "make_garbage_collection",
    "make_modify",
    "make_purge",
    "make_purge_nodes",
    "make_register_enqueuer",
    "make_requeue",
    "make_return",
    "make_settle",
    "make_update_config",
]


class Enqueue(NamedTuple):
    name: str
    pid: Any
    seq: int | None
    msg: Any


class E(NamedTuple):
    """Compact tracked enqueue (v4+): the publisher pid comes from the reply mode."""

    name: str
    seq: int
    msg: Any
    size: tuple[int, int]


class Requeue(NamedTuple):
    name: str
    consumer_key: Any
    msg_id: int
    idx: int
    header: Any
    msg: Any


class RegisterEnqueuer(NamedTuple):
    name: str
    pid: Any


class Checkout(NamedTuple):
    name: str
    consumer_id: tuple[Any, Any]
    spec: Any
    meta: Mapping[str, Any]


class Settle(NamedTuple):
    name: str
    consumer_key: Any
    msg_ids: Sequence[int]


class Return(NamedTuple):
    name: str
    consumer_key: Any
    msg_ids: Sequence[int]


class Discard(NamedTuple):
    name: str
    consumer_key: Any
    msg_ids: Sequence[int]


class Credit(NamedTuple):
    name: str
    consumer_key: Any
    credit: int
    delivery_count: int
    drain: bool


class Modify(NamedTuple):
    name: str
    consumer_key: Any
    msg_ids: Sequence[int]
    delivery_failed: bool
    undeliverable_here: bool
    annotations: Mapping[str, Any]


class Purge(NamedTuple):
    name: str


class PurgeNodes(NamedTuple):
    name: str
    nodes: Sequence[Any]


class UpdateConfig(NamedTuple):
    name: str
    config: Mapping[str, Any]


class GarbageCollection(NamedTuple):
    name: str


def make_enqueue(pid: Any, seq: int | None, msg: Any, compact: bool = True) -> Enqueue | E:
    """Tracked enqueues use the compact ``e`` record, as v4+ clients do (not
    `compact`: the ``enqueue`` record, as a 3.10 client sends to machine 2)."""
    if compact and pid is not None and isinstance(seq, int):
        return E("e", seq, msg, mc.message_size(msg))
    return Enqueue("enqueue", pid, seq, msg)


def make_register_enqueuer(pid: Any) -> RegisterEnqueuer:
    return RegisterEnqueuer("register_enqueuer", pid)


def make_checkout(consumer_id: tuple[Any, Any], spec: Any, meta: Mapping[str, Any]) -> Checkout:
    return Checkout("checkout", consumer_id, spec, meta)


def make_settle(key: Any, msg_ids: Sequence[int]) -> Settle:
    return Settle("settle", key, list(msg_ids))


def make_return(key: Any, msg_ids: Sequence[int]) -> Return:
    return Return("return", key, list(msg_ids))


def make_discard(key: Any, msg_ids: Sequence[int]) -> Discard:
    return Discard("discard", key, list(msg_ids))


def make_credit(key: Any, credit: int, delivery_count: int, drain: bool) -> Credit:
    return Credit("credit", key, credit, delivery_count, drain)


def make_modify(
    key: Any,
    msg_ids: Sequence[int],
    delivery_failed: bool,
    undeliverable_here: bool,
    annotations: Mapping[str, Any],
) -> Modify:
    return Modify("modify", key, list(msg_ids), delivery_failed, undeliverable_here,
                  dict(annotations))


def make_requeue(key: Any, msg_id: int, index: int, header: Any, msg: Any) -> Requeue:
    return Requeue("requeue", key, msg_id, index, header, msg)


def make_purge() -> Purge:
    return Purge("purge")


def make_purge_nodes(nodes: Sequence[Any]) -> PurgeNodes:
    return PurgeNodes("purge_nodes", list(nodes))


def make_update_config(config: Mapping[str, Any]) -> UpdateConfig:
    return UpdateConfig("update_config", dict(config))


def make_garbage_collection() -> GarbageCollection:
    return GarbageCollection("garbage_collection")


def make_dlx_checkout(pid: Any, prefetch: int) -> tuple[str, tuple[str, Any, int]]:
    return ("dlx", ("checkout", pid, prefetch))


def make_dlx_settle(msg_ids: Sequence[int]) -> tuple[str, tuple[str, list[int]]]:
    return ("dlx", ("settle", list(msg_ids)))


def get_msg(cmd: Any) -> Any:
    """The message body carried by an enqueue-like command read back from the log."""
    match cmd:
        case ("e", _, msg, _):
            return msg
        case ("enqueue", _, _, msg):
            return msg
        case ("requeue", _, _, _, _, msg):
            return msg
    raise ValueError(f"not an enqueue command: {cmd!r}")
