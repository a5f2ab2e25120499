"""Exchanges and bindings of a node, with RabbitMQ's checks and error texts.

This is warren's stand-in for the exchange and binding tables of RabbitMQ's
metadata store: a plain object shared by the channels of one node (they run on
one hub, so its methods never interleave). It answers declare / delete /
bind / unbind with RabbitMQ's errors (`rabbit_channel`, `rabbit_binding`) and routes a
message to a list of queue names, following exchange-to-exchange bindings and
alternate exchanges (`rabbit_exchange_type_*`). Queue existence is the queue backend's business, so
callers pass a `queue_exists` predicate where a binding needs one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from channel.errors import AmqpError, rs
from channel.exchanges import routing
from channel.queue_types.queue_args import amqp_type

__all__ = ["EXCHANGE_TYPES", "Binding", "Exchange", "Topology"]

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
DEFAULT_EXCHANGE_ERROR = "operation not permitted on the default exchange"
PREDECLARED = (
    ("", "direct"), ("amq.direct", "direct"), ("amq.fanout", "fanout"),
    ("amq.topic", "topic"), ("amq.headers", "headers"), ("amq.match", "headers"),
)


@dataclass
class Exchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Binding:
    source: str
    kind: str  # "queue" | "exchange"
    destination: str
    key: str
    arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.arguments)


def _freeze(arguments: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    items = []
    for k, v in (arguments or {}).items():
        items.append((k, _hashable(v)))
    return tuple(items)


def _hashable(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple((k, _hashable(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _flag(value: Any) -> str:
    if isinstance(value, bool):
        return "'true'" if value else "'false'"
    return f"'{value}'"


@dataclass
class _VHost:
    exchanges: dict[str, Exchange] = field(default_factory=dict)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)


class Topology:
    """Exchanges and bindings per vhost."""

    def __init__(self, vhosts: tuple[str, ...] = ("/",)) -> None:
        self.vhosts: dict[str, _VHost] = {}
        for vhost in vhosts:
            self.add_vhost(vhost)

    def add_vhost(self, vhost: str) -> None:
        vh = self.vhosts.setdefault(vhost, _VHost())
        for name, type_ in PREDECLARED:
            vh.exchanges.setdefault(name, Exchange(name, type_, durable=True))

    def _vh(self, vhost: str) -> _VHost:
        return self.vhosts[vhost]

    def lookup(self, vhost: str, name: str) -> Exchange | None:
        return self._vh(vhost).exchanges.get(name)

    def lookup_or_die(self, vhost: str, name: str) -> Exchange:
        x = self.lookup(vhost, name)
        if x is None:
            raise AmqpError("NOT_FOUND", f"no {rs('exchange', name, vhost)}")
        return x

    # ------------------------------------------------------------- exchanges

    def declare(self, vhost: str, name: str, type_: str, *, passive: bool = False,
                durable: bool = False, auto_delete: bool = False, internal: bool = False,
                arguments: Mapping[str, Any] | None = None) -> Exchange:
        if passive:
            if name == "":
                raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
            return self.lookup_or_die(vhost, name)
        if type_ not in EXCHANGE_TYPES:
            raise AmqpError("PRECONDITION_FAILED", f"unknown exchange type '{type_}'")
        if name == "":
            raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
        args = dict(arguments or {})
        x = self.lookup(vhost, name)
        if x is None:
            if name.startswith("amq."):
                raise AmqpError(
                    "ACCESS_REFUSED", f"exchange name '{name}' contains reserved prefix 'amq.*'"
                )
            ae = args.get("alternate-exchange")
            if ae is not None and not isinstance(ae, str):
                raise AmqpError(
                    "PRECONDITION_FAILED",
                    f"invalid type '{amqp_type(ae)}' for arg 'alternate-exchange' in "
                    f"{rs('exchange', name, vhost)}",
                )
            x = Exchange(name, type_, durable, auto_delete, internal, args)
            self._vh(vhost).exchanges[name] = x
        where = rs("exchange", name, vhost)
        for key, new, cur in (("type", type_, x.type), ("durable", durable, x.durable),
                              ("auto_delete", auto_delete, x.auto_delete),
                              ("internal", internal, x.internal)):
            if new != cur:
                raise AmqpError(
                    "PRECONDITION_FAILED",
                    f"inequivalent arg '{key}' for {where}: "
                    f"received {_flag(new)} but current is {_flag(cur)}",
                )
        new_ae, cur_ae = args.get("alternate-exchange"), x.arguments.get("alternate-exchange")
        if new_ae != cur_ae:
            def show(v: Any) -> str:
                return "none" if v is None else f"the value '{v}' of type '{amqp_type(v)}'"
            received = f"'{new_ae}'" if cur_ae is not None and new_ae is not None else show(new_ae)
            current = f"'{cur_ae}'" if cur_ae is not None and new_ae is not None else show(cur_ae)
            raise AmqpError(
                "PRECONDITION_FAILED",
                f"inequivalent arg 'alternate-exchange' for {where}: "
                f"received {received} but current is {current}",
            )
        return x

    def delete(self, vhost: str, name: str, *, if_unused: bool = False) -> None:
        if name == "":
            raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
        if name.startswith("amq."):
            raise AmqpError(
                "ACCESS_REFUSED",
                f"deletion of system exchange '{name}' in vhost '{vhost}' not allowed",
            )
        vh = self._vh(vhost)
        if name not in vh.exchanges:
            return
        if if_unused and vh.bindings.get(name):
            raise AmqpError("PRECONDITION_FAILED", f"{rs('exchange', name, vhost)} in use")
        self._remove_exchange(vh, name)

    def _remove_exchange(self, vh: _VHost, name: str) -> None:
        vh.exchanges.pop(name, None)
        vh.bindings.pop(name, None)
        for source in list(vh.bindings):
            vh.bindings[source] = [
                b for b in vh.bindings[source]
                if not (b.kind == "exchange" and b.destination == name)
            ]
            self._maybe_auto_delete(vh, source)

    def _maybe_auto_delete(self, vh: _VHost, source: str) -> None:
        x = vh.exchanges.get(source)
        if x is not None and x.auto_delete and not vh.bindings.get(source):
            self._remove_exchange(vh, source)

    # -------------------------------------------------------------- bindings

    def bind(self, vhost: str, source: str, kind: str, destination: str, key: str,
             arguments: Mapping[str, Any] | None, queue_exists: Callable[[str], bool]) -> None:
        if source == "" or (kind == "exchange" and destination == ""):
            raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
        x = self.lookup_or_die(vhost, source)
        if kind == "exchange":
            self.lookup_or_die(vhost, destination)
        elif not queue_exists(destination):
            raise AmqpError("NOT_FOUND", f"no {rs('queue', destination, vhost)}")
        if x.type == "headers":
            routing.check_x_match(arguments or {})
        binding = Binding(source, kind, destination, key, _freeze(arguments))
        existing = self._vh(vhost).bindings.setdefault(source, [])
        if binding not in existing:
            existing.append(binding)

    def unbind(self, vhost: str, source: str, kind: str, destination: str, key: str,
               arguments: Mapping[str, Any] | None) -> None:
        if source == "" or (kind == "exchange" and destination == ""):
            raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
        vh = self._vh(vhost)
        binding = Binding(source, kind, destination, key, _freeze(arguments))
        if binding in vh.bindings.get(source, []):
            vh.bindings[source].remove(binding)
            self._maybe_auto_delete(vh, source)

    def remove_queue(self, vhost: str, queue: str) -> None:
        """A deleted queue loses its bindings (and may take auto-delete exchanges)."""
        vh = self._vh(vhost)
        for source in list(vh.bindings):
            before = vh.bindings[source]
            after = [b for b in before if not (b.kind == "queue" and b.destination == queue)]
            if len(after) != len(before):
                vh.bindings[source] = after
                self._maybe_auto_delete(vh, source)

    def bindings(self, vhost: str, source: str) -> list[Binding]:
        return list(self._vh(vhost).bindings.get(source, []))

    # --------------------------------------------------------------- routing

    def _matches(self, x: Exchange, keys: list[str],
                 headers: Mapping[str, Any] | None, vh: _VHost) -> list[Binding]:
        bindings = vh.bindings.get(x.name, [])
        if x.type == "fanout":
            return list(bindings)
        if x.type == "direct":
            return [b for b in bindings if b.key in keys]
        if x.type == "topic":
            return [b for b in bindings if any(routing.topic_match(b.key, k) for k in keys)]
        if x.type == "headers":
            return [b for b in bindings if routing.headers_match(b.args, headers)]
        return []

    def route(self, vhost: str, exchange: str, keys: list[str],
              headers: Mapping[str, Any] | None) -> list[str]:
        """Queue names a message reaches (each once); the default exchange names them."""
        vh = self._vh(vhost)
        if exchange == "":
            return routing.dedup(keys)
        queues: list[str] = []
        visited: set[str] = set()
        pending = [exchange]
        while pending:
            name = pending.pop(0)
            if name in visited:
                continue
            visited.add(name)
            x = vh.exchanges.get(name)
            if x is None:
                continue
            matched = self._matches(x, keys, headers, vh)
            for b in matched:
                if b.kind == "queue":
                    queues.append(b.destination)
                else:
                    pending.append(b.destination)
            ae = x.arguments.get("alternate-exchange")
            if not matched and isinstance(ae, str):
                pending.append(ae)
        return routing.dedup(queues)
