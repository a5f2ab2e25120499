"""Probes: the same client steps, run with pika against any broker, each returning
what the client observed as plain data (codes, texts, bodies, headers).

A probe gets a `Target` (the AMQP ports of a three-node cluster and a way to kill
one of its nodes) and uses only what any AMQP 0-9-1 client can see, so the same
probe runs unchanged against RabbitMQ and against warren. Observations leave out
what legitimately differs between two runs: timestamps become "<time>".
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions as pex

from tests.broker.broker_support import eventually
from tests.differential.wire_types import capture, header_types, raw_properties

QQ = {"x-queue-type": "quorum"}


@dataclass
class Target:
    """A running three-node cluster a probe talks to."""

    name: str
    ports: list[int]
    kill: Callable[[int], None]
    """SIGKILL the node at this index (0-based)."""


def connect(target: Target, node: int = 0) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", target.ports[node], connection_attempts=3, retry_delay=0.5,
        heartbeat=0, blocked_connection_timeout=30))


def normalise(value: Any) -> Any:
    """Plain, comparable data: bytes as text, timestamps as "<time>"."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, datetime.datetime):
        return "<time>"
    if isinstance(value, dict):
        return {k: ("<time>" if k in ("time", "timestamp") else normalise(v))
                for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [normalise(v) for v in value]
    return value


def attempt(conn: pika.BlockingConnection, step: Callable[[Any], Any]) -> Any:
    """Run `step` on a fresh channel: ["ok", result] or the channel error's [code, text]."""
    ch = conn.channel()
    try:
        result = step(ch)
    except pex.ChannelClosedByBroker as e:
        return [e.reply_code, e.reply_text]
    if ch.is_open:
        ch.close()
    return ["ok", normalise(result)]


def isolated(t: Target, step: Callable[[Any], Any]) -> Any:
    """`attempt` on a connection of its own: a hard error closes only that one, and is
    observed as [code, text, "connection closed"]."""
    conn = connect(t)
    try:
        return attempt(conn, step)
    except pex.ConnectionClosedByBroker as e:
        return [e.reply_code, e.reply_text, "connection closed"]
    finally:
        if conn.is_open:
            conn.close()


def message(props: pika.BasicProperties | None, body: bytes, method: Any = None) -> dict[str, Any]:
    """What a consumer sees of a delivery (besides its tag)."""
    out: dict[str, Any] = {"body": body.decode()}
    if method is not None:
        out["redelivered"] = bool(method.redelivered)
    if props is not None and props.headers:
        out["headers"] = normalise(props.headers)
    return out


def drain(ch: Any, queue: str, limit: int = 100) -> list[dict[str, Any]]:
    """basic.get with auto-ack until the queue is empty."""
    got = []
    for _ in range(limit):
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            break
        got.append(message(props, body, method))
    return got


# ------------------------------------------------------------------ the probes


def declare_errors(t: Target) -> Any:
    """Declare and redeclare refusals: their codes and texts."""
    conn = connect(t)
    try:
        steps: dict[str, Callable[[Any], Any]] = {
            "non-durable quorum": lambda ch: ch.queue_declare("de-q1", durable=False,
                                                              arguments=QQ),
            "exclusive quorum": lambda ch: ch.queue_declare("de-q2", durable=True,
                                                            exclusive=True, arguments=QQ),
            "auto-delete quorum": lambda ch: ch.queue_declare("de-q3", durable=True,
                                                              auto_delete=True, arguments=QQ),
            "server-named quorum": lambda ch: ch.queue_declare("", durable=True, arguments=QQ),
            "reserved name": lambda ch: ch.queue_declare("amq.de", durable=True, arguments=QQ),
            "unknown queue type": lambda ch: ch.queue_declare(
                "de-q4", durable=True, arguments={"x-queue-type": "nonsense"}),
            "negative max-length": lambda ch: ch.queue_declare(
                "de-q5", durable=True, arguments={**QQ, "x-max-length": -1}),
            "bad overflow": lambda ch: ch.queue_declare(
                "de-q6", durable=True, arguments={**QQ, "x-overflow": "sometimes"}),
            "quorum with priority": lambda ch: ch.queue_declare(
                "de-q7", durable=True, arguments={**QQ, "x-max-priority": 5}),
            "passive missing": lambda ch: ch.queue_declare("de-missing", passive=True),
            "declare": lambda ch: ch.queue_declare(
                "de-a", durable=True, arguments={**QQ, "x-max-length": 10}).method.queue,
            "same again": lambda ch: ch.queue_declare(
                "de-a", durable=True, arguments={**QQ, "x-max-length": 10}).method.queue,
            "other max-length": lambda ch: ch.queue_declare(
                "de-a", durable=True, arguments={**QQ, "x-max-length": 11}),
            "as classic": lambda ch: ch.queue_declare("de-a", durable=True),
            "non-durable again": lambda ch: ch.queue_declare("de-a", durable=False,
                                                             arguments=QQ),
            "passive existing": lambda ch: ch.queue_declare("de-a", passive=True).method
            .message_count,
            "classic declared": lambda ch: ch.queue_declare("de-c", durable=True).method.queue,
            "classic as quorum": lambda ch: ch.queue_declare("de-c", durable=True,
                                                             arguments=QQ),
        }
        return {name: attempt(conn, step) for name, step in steps.items()}
    finally:
        conn.close()


def requeue_positions(t: Target) -> Any:
    """Where nacked-with-requeue and rejected messages go back, and what they carry."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.queue_declare("rq", durable=True, arguments=QQ)
        ch.confirm_delivery()
        for i in range(1, 6):
            ch.basic_publish("", "rq", f"m{i}".encode())
        ch.basic_qos(prefetch_count=5)
        tags = {}
        for _ in range(5):
            method, _props, body = ch.basic_get("rq", auto_ack=False)
            tags[body.decode()] = method.delivery_tag
        ch.basic_nack(tags["m2"], requeue=True)
        ch.basic_reject(tags["m4"], requeue=True)
        ch.basic_nack(tags["m5"], requeue=True)
        ch.basic_ack(tags["m1"])
        ch.basic_ack(tags["m3"])
        return drain(ch, "rq")
    finally:
        conn.close()


def dead_letter_pair(ch: Any, prefix: str, kind: str, src_args: dict[str, Any],
                     routing_key: str | None = None) -> None:
    """Quorum queues `prefix`-src, dead-lettering to exchange `prefix`-x (of `kind`),
    and `prefix`-target bound to that exchange with `routing_key`."""
    ch.exchange_declare(f"{prefix}-x", kind, durable=True)
    ch.queue_declare(f"{prefix}-target", durable=True, arguments=QQ)
    ch.queue_bind(f"{prefix}-target", f"{prefix}-x", routing_key)
    ch.queue_declare(f"{prefix}-src", durable=True, arguments={
        **QQ, **src_args, "x-dead-letter-exchange": f"{prefix}-x"})


def delivery_limit_dead_letter(t: Target) -> Any:
    """A message requeued past `x-delivery-limit` is dead-lettered: its headers."""
    conn = connect(t)
    try:
        ch = conn.channel()
        dead_letter_pair(ch, "dl", "fanout", {"x-delivery-limit": 2})
        ch.confirm_delivery()
        ch.basic_publish("", "dl-src", b"limited",
                         pika.BasicProperties(headers={"app": "probe"}))
        seen = []
        for _ in range(4):
            method, props, body = ch.basic_get("dl-src", auto_ack=False)
            if method is None:
                break
            seen.append(message(props, body, method))
            ch.basic_nack(method.delivery_tag, requeue=True)
        dead = eventually(lambda: drain(ch, "dl-target"))
        return {"seen": seen, "left": drain(ch, "dl-src"), "dead": dead}
    finally:
        conn.close()


def ttl_and_expiry(t: Target) -> Any:
    """Message TTL dead-letters with reason expired; an unused queue expires."""
    conn = connect(t)
    try:
        ch = conn.channel()
        dead_letter_pair(ch, "ttl", "fanout", {"x-message-ttl": 200})
        ch.confirm_delivery()
        ch.basic_publish("", "ttl-src", b"short")
        ch.basic_publish("", "ttl-src", b"per-message",
                         pika.BasicProperties(expiration="100"))
        dead = eventually(lambda: (lambda d: d if len(d) == 2 else None)(
            drain(ch, "ttl-target")) or None)
        ch.queue_declare("ttl-expires", durable=True, arguments={**QQ, "x-expires": 500})
        gone = eventually(lambda: attempt(conn, lambda c: c.queue_declare(
            "ttl-expires", passive=True))[0] == 404)
        missing = attempt(conn, lambda c: c.queue_declare("ttl-expires", passive=True))
        return {"dead": dead, "expired queue gone": gone, "passive": missing}
    finally:
        conn.close()


def length_limits(t: Target) -> Any:
    """x-max-length with drop-head and with reject-publish."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("len-drop", durable=True, arguments={**QQ, "x-max-length": 2})
        for i in range(1, 5):
            ch.basic_publish("", "len-drop", f"d{i}".encode())
        ch.queue_declare("len-reject", durable=True, arguments={
            **QQ, "x-max-length": 2, "x-overflow": "reject-publish"})
        outcomes = []
        for i in range(1, 5):
            try:
                ch.basic_publish("", "len-reject", f"r{i}".encode(), mandatory=False)
                outcomes.append("ack")
            except pex.NackError:
                outcomes.append("nack")
        return {"drop-head": drain(ch, "len-drop"), "reject-publish": outcomes,
                "kept": drain(ch, "len-reject")}
    finally:
        conn.close()


def single_active_consumer(t: Target) -> Any:
    """Only the first consumer gets messages; on its cancel the next one takes over."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.queue_declare("sac", durable=True, arguments={**QQ, "x-single-active-consumer": True})
        ch.confirm_delivery()
        got: list[tuple[str, str]] = []
        ch.basic_qos(prefetch_count=10)

        def consumer(tag: str) -> Callable[..., None]:
            def on_message(c: Any, m: Any, _p: Any, b: bytes) -> None:
                got.append((tag, b.decode()))
                c.basic_ack(m.delivery_tag)
            return on_message

        for tag in ("first", "second"):
            ch.basic_consume("sac", consumer(tag), consumer_tag=tag)
        for i in range(1, 4):
            ch.basic_publish("", "sac", f"s{i}".encode())
        eventually(lambda: conn.process_data_events(0.1) or len(got) >= 3, 10)
        ch.basic_cancel("first")
        for i in range(4, 6):
            ch.basic_publish("", "sac", f"s{i}".encode())
        eventually(lambda: conn.process_data_events(0.1) or len(got) >= 5, 10)
        return [list(g) for g in got]
    finally:
        conn.close()


def basic_get(t: Target) -> Any:
    """basic.get on an empty queue, its message counts, and a redelivery."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.queue_declare("get", durable=True, arguments=QQ)
        empty = ch.basic_get("get", auto_ack=True)[0] is None
        ch.confirm_delivery()
        for i in range(1, 4):
            ch.basic_publish("", "get", f"g{i}".encode())
        first, _props, body = ch.basic_get("get", auto_ack=False)
        counts = [first.message_count, body.decode(), first.redelivered]
        ch.basic_reject(first.delivery_tag, requeue=True)
        again, props, body2 = ch.basic_get("get", auto_ack=True)
        return {"empty": empty, "first": counts,
                "again": [again.message_count, message(props, body2, again)]}
    finally:
        conn.close()


def requeue_without_limit(t: Target) -> Any:
    """A quorum queue declared without `x-delivery-limit`, its message nacked with
    requeue by a consumer 25 times: each delivery's redelivered flag and
    `x-delivery-count`, and whether the message is still there (3.10 has no default
    limit; 4.x drops it after the 21st delivery)."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.queue_declare("rq-many", durable=True, arguments=QQ)
        ch.confirm_delivery()
        ch.basic_publish("", "rq-many", b"again")
        ch.basic_qos(prefetch_count=1)
        seen: list[list[Any]] = []

        def on_message(c: Any, method: Any, props: Any, _body: bytes) -> None:
            seen.append([bool(method.redelivered), (props.headers or {}).get("x-delivery-count")])
            if len(seen) <= 25:
                c.basic_nack(method.delivery_tag, requeue=True)
            else:
                c.basic_ack(method.delivery_tag)

        ch.basic_consume("rq-many", on_message)
        count = -1
        while len(seen) != count and len(seen) <= 25:  # until it stops coming back
            count = len(seen)
            conn.process_data_events(2)
        return {"deliveries": seen,
                "left": ch.queue_declare("rq-many", passive=True).method.message_count}
    finally:
        conn.close()


def leader_kill(t: Target) -> Any:
    """Publish with confirms through a follower's node while the leader's node is
    killed: nothing confirmed is lost, and what each client sees."""
    leader_conn = connect(t, 0)  # client-local: the leader is on the declaring node
    ch = leader_conn.channel()
    ch.queue_declare("kill", durable=True, arguments=QQ)
    pub = connect(t, 1)
    pch = pub.channel()
    pch.confirm_delivery()
    confirmed: list[str] = []
    for i in range(50):
        pch.basic_publish("", "kill", f"k{i}".encode())
        confirmed.append(f"k{i}")
    t.kill(0)
    leader_side = "open"
    try:
        leader_conn.process_data_events(2)
        leader_conn.process_data_events(2)
    except (pex.AMQPConnectionError, pex.StreamLostError, ConnectionError):
        leader_side = "lost"
    errors: list[str] = []
    for i in range(50, 100):
        try:
            pch.basic_publish("", "kill", f"k{i}".encode())
            confirmed.append(f"k{i}")
        except (pex.NackError, pex.UnroutableError) as e:
            errors.append(type(e).__name__)
    follower_side = "open" if pub.is_open else "closed"
    got = {m["body"] for m in drain(pch, "kill", 1000)}
    pub.close()
    return {"leader's client": leader_side, "follower's client": follower_side,
            "publish errors": errors, "confirmed lost": sorted(set(confirmed) - got),
            "confirmed": len(confirmed)}


def connection_start_and_tune(t: Target) -> Any:
    """What `connection.start` says the server is, and what `connection.tune` offers
    (pika takes the server's frame_max and channel_max when it asks for no limit).
    `cluster_name` names a node and differs legitimately."""
    conn = connect(t)
    try:
        impl = conn._impl
        props = dict(impl.server_properties)
        props.pop("cluster_name", None)
        return {"server": normalise(props), "frame_max": impl.params.frame_max,
                "channel_max": impl.params.channel_max}
    finally:
        conn.close()


def channel_errors(t: Target) -> Any:
    """Channel-level refusals a client meets every day, with their codes and texts."""
    conn = connect(t)
    try:
        ch = conn.channel()
        ch.queue_declare("ce", durable=True, arguments=QQ)
        ch.confirm_delivery()
        ch.basic_publish("", "ce", b"one")

        def consume_missing(c: Any) -> Any:
            c.basic_consume("ce-missing", lambda *a: None)

        def ack_unknown(c: Any) -> Any:
            c.basic_ack(99)
            c.queue_declare("ce", passive=True)  # a round trip to see the error

        def get_then_double_ack(c: Any) -> Any:
            method, _p, _b = c.basic_get("ce", auto_ack=False)
            c.basic_ack(method.delivery_tag)
            c.basic_ack(method.delivery_tag)
            c.queue_declare("ce", passive=True)

        def purge_confirmed(c: Any) -> Any:
            c.confirm_delivery()  # both confirmed, so both are in the queue to purge
            c.basic_publish("", "ce", b"two")
            c.basic_publish("", "ce", b"three")
            return c.queue_purge("ce").method.message_count

        steps: dict[str, Callable[[Any], Any]] = {
            "publish to a missing exchange": lambda c: (
                c.confirm_delivery(), c.basic_publish("ce-none", "k", b"x")),
            "consume a missing queue": consume_missing,
            "ack an unknown tag": ack_unknown,
            "delete if empty": lambda c: c.queue_delete("ce", if_empty=True),
            "bind to a missing exchange": lambda c: c.queue_bind("ce", "ce-none", "k"),
            "redeclare amq.direct": lambda c: c.exchange_declare("amq.direct", "fanout"),
            "declare a bad exchange type": lambda c: c.exchange_declare("ce-x", "sideways"),
            "ack twice": get_then_double_ack,
            "purge": purge_confirmed,
        }
        return {name: isolated(t, step) for name, step in steps.items()}
    finally:
        conn.close()


def reject_to_dead_letter(t: Target) -> Any:
    """basic.reject and basic.nack without requeue dead-letter with reason rejected,
    routed by `x-dead-letter-routing-key`."""
    conn = connect(t)
    try:
        ch = conn.channel()
        dead_letter_pair(ch, "rj", "direct", {"x-dead-letter-routing-key": "dead"},
                         routing_key="dead")
        ch.confirm_delivery()
        for body in (b"r1", b"r2"):
            ch.basic_publish("", "rj-src", body, pika.BasicProperties(
                headers={"CC": ["rj-cc"]}, content_type="text/plain"))
        first, _p, _b = ch.basic_get("rj-src", auto_ack=False)
        ch.basic_reject(first.delivery_tag, requeue=False)
        second, _p, _b = ch.basic_get("rj-src", auto_ack=False)
        ch.basic_nack(second.delivery_tag, requeue=False)
        return eventually(lambda: (lambda d: d if len(d) == 2 else None)(
            drain(ch, "rj-target")) or None)
    finally:
        conn.close()


def _field_types(props: Any) -> Any:
    raw = raw_properties(props)
    return None if raw is None else header_types(raw)


def _collect_types(conn: Any, ch: Any, queue: str, count: int) -> list[Any]:
    """`count` messages got from `queue` (waiting for them): body and header types."""
    got: list[Any] = []

    def more() -> bool:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            got.append([body.decode(), _field_types(props)])
        return len(got) >= count

    eventually(more)
    return sorted(got)


def header_field_types(t: Target) -> Any:
    """The AMQP field type of every header the broker adds (pika decodes all integers
    alike, so the other probes cannot see them): `x-delivery-count` on a quorum
    queue's get and consume, and the `x-death`, `x-first-death-*` and
    `x-last-death-*` of messages dead-lettered with a routing key from a quorum and
    a classic queue into a classic and a quorum queue (whether `CC` stays, too)."""
    with capture():
        conn = connect(t)
        try:
            ch = conn.channel()
            ch.queue_declare("ft-q", durable=True, arguments=QQ)
            ch.confirm_delivery()
            ch.basic_publish("", "ft-q", b"m", pika.BasicProperties(headers={"n": 7}))
            seen: dict[str, Any] = {}
            for step in ("first get", "second get"):
                method, props, _body = ch.basic_get("ft-q", auto_ack=False)
                seen[step] = _field_types(props)
                ch.basic_nack(method.delivery_tag, requeue=True)
            consumed: list[Any] = []

            def on_message(c: Any, method: Any, props: Any, _body: bytes) -> None:
                consumed.append(_field_types(props))
                c.basic_ack(method.delivery_tag)

            ch.basic_consume("ft-q", on_message)
            eventually(lambda: conn.process_data_events(0.1) or consumed, 10)
            seen["consume"] = consumed
            ch.exchange_declare("ft-dlx", "direct", durable=True)
            for target, args in (("ft-dead-classic", {}), ("ft-dead-quorum", QQ)):
                ch.queue_declare(target, durable=True, arguments=args)
                ch.queue_bind(target, "ft-dlx", "dead")
            for source, args in (("ft-src-quorum", QQ), ("ft-src-classic", {})):
                ch.queue_declare(source, durable=True, arguments={
                    **args, "x-dead-letter-exchange": "ft-dlx",
                    "x-dead-letter-routing-key": "dead"})
                ch.basic_publish("", source, source.encode(), pika.BasicProperties(
                    headers={"CC": ["ft-nowhere"]}, expiration="60000"))
                method, _props, _body = ch.basic_get(source, auto_ack=False)
                ch.basic_reject(method.delivery_tag, requeue=False)
            for target in ("ft-dead-classic", "ft-dead-quorum"):
                seen[target] = _collect_types(conn, ch, target, 2)
            return seen
        finally:
            conn.close()


PROBES: dict[str, Callable[[Target], Any]] = {
    "connection_start_and_tune": connection_start_and_tune,
    "channel_errors": channel_errors,
    "reject_to_dead_letter": reject_to_dead_letter,
    "declare_errors": declare_errors,
    "requeue_positions": requeue_positions,
    "delivery_limit_dead_letter": delivery_limit_dead_letter,
    "ttl_and_expiry": ttl_and_expiry,
    "length_limits": length_limits,
    "single_active_consumer": single_active_consumer,
    "basic_get": basic_get,
    "requeue_without_limit": requeue_without_limit,
    "header_field_types": header_field_types,
    # last: it kills a node of each cluster
    "leader_kill": leader_kill,
}
