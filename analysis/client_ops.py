"""Recording helpers for workload clients: one method per `client_ops` kind.

AMQP settles and confirms with `multiple=true`; the history wants one row per message,
so this layer remembers each channel's outstanding publishes (by confirm sequence
number) and unsettled deliveries (by delivery tag) and expands multiple into rows.
It writes through any sink with the `actors.trace` signature, usually `Recorder.sink`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

Sink = Callable[[str, dict[str, Any]], None]


def body_digest(body: bytes) -> int:
    """64-bit signed digest of a message body (recomputed by consumers)."""
    return int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "big", signed=True)


class ClientChannel:
    """History of one client channel: `conn_id/channel_id`."""

    def __init__(self, sink: Sink, conn_id: str, channel_id: int, emitter: str) -> None:
        self._sink = sink
        self.conn_id = conn_id
        self.channel_id = channel_id
        self.emitter = emitter
        self.pub_chan = f"{conn_id}/{channel_id}"
        self._unconfirmed: dict[int, tuple[int, str]] = {}  # pub_seq -> (msg_id, queue)
        self._unsettled: dict[int, tuple[int, str]] = {}  # delivery_tag -> (msg_id, queue)

    def _emit(self, kind: str, **fields: Any) -> None:
        fields.update(conn_id=self.conn_id, channel_id=self.channel_id, emitter=self.emitter)
        self._sink(kind, fields)

    def open(self) -> None:
        self._emit("channel_open")

    def publish(self, queue: str, msg_id: int, pub_seq: int, body: bytes) -> None:
        self._unconfirmed[pub_seq] = (msg_id, queue)
        self._emit("publish", queue=queue, msg_id=msg_id, pub_chan=self.pub_chan,
                   pub_seq=pub_seq, body_digest=body_digest(body))

    def _covered(self, pending: dict[int, tuple[int, str]], key: int,
                 multiple: bool) -> list[tuple[int, int, str]]:
        keys = sorted(k for k in pending if k <= key) if multiple else [key]
        return [(k, *pending.pop(k)) for k in keys if k in pending]

    def confirm(self, pub_seq: int, multiple: bool = False) -> None:
        """Broker `basic.ack` of publishes: one `confirm` row per covered message."""
        for seq, msg_id, queue in self._covered(self._unconfirmed, pub_seq, multiple):
            self._emit("confirm", queue=queue, msg_id=msg_id, pub_seq=seq, multiple=multiple,
                       outcome="ok")

    def pub_nack(self, pub_seq: int, multiple: bool = False) -> None:
        for seq, msg_id, queue in self._covered(self._unconfirmed, pub_seq, multiple):
            self._emit("pub_nack", queue=queue, msg_id=msg_id, pub_seq=seq, multiple=multiple,
                       outcome="fail")

    def returned(self, queue: str, msg_id: int, reply_code: int | None = None) -> None:
        """Broker `basic.return` of a mandatory publish no queue took (`return`): the
        publisher was told, so the message is not lost (its confirm follows as usual)."""
        self._emit("return", queue=queue, msg_id=msg_id,
                   error=None if reply_code is None else str(reply_code))

    def timeout_unconfirmed(self, error: str = "confirm timeout") -> None:
        """Every publish still unconfirmed becomes indeterminate (`pub_timeout`)."""
        for seq in sorted(self._unconfirmed):
            msg_id, queue = self._unconfirmed.pop(seq)
            self._emit("pub_timeout", queue=queue, msg_id=msg_id, pub_seq=seq, outcome="info",
                       error=error)

    def deliver(self, queue: str, consumer_tag: str | None, delivery_tag: int, msg_id: int,
                body: bytes, redelivered: bool, pub_chan: str | None = None,
                pub_seq: int | None = None, delivery_count: int | None = None,
                kind: str = "deliver") -> None:
        """A `basic.deliver` (or `basic.get-ok` with kind="get_ok")."""
        self._unsettled[delivery_tag] = (msg_id, queue)
        self._emit(kind, queue=queue, consumer_tag=consumer_tag, delivery_tag=delivery_tag,
                   msg_id=msg_id, body_digest=body_digest(body), redelivered=redelivered,
                   pub_chan=pub_chan, pub_seq=pub_seq, delivery_count=delivery_count)

    def _settle(self, kind: str, delivery_tag: int, multiple: bool,
                requeue: bool | None) -> None:
        for tag, msg_id, queue in self._covered(self._unsettled, delivery_tag, multiple):
            self._emit(kind, queue=queue, msg_id=msg_id, delivery_tag=tag, multiple=multiple,
                       requeue=requeue)

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        self._settle("ack", delivery_tag, multiple, None)

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self._settle("nack", delivery_tag, multiple, requeue)

    def reject(self, delivery_tag: int, requeue: bool = True) -> None:
        self._settle("reject", delivery_tag, False, requeue)

    def consume_ok(self, queue: str, consumer_tag: str) -> None:
        self._emit("consume_ok", queue=queue, consumer_tag=consumer_tag)

    def cancel(self, queue: str, consumer_tag: str) -> None:
        self._emit("cancel", queue=queue, consumer_tag=consumer_tag)

    def close(self, error: str | None = None) -> None:
        """Channel closed (abnormally when `error` is given); unconfirmed become info."""
        self.timeout_unconfirmed(error or "channel closed")
        self._unsettled.clear()
        self._emit("channel_close", error=error, outcome="ok" if error is None else "fail")


class ClientHistory:
    """History of one workload client process (its connections and drain phases)."""

    def __init__(self, sink: Sink, client: str) -> None:
        self._sink = sink
        self.client = client

    def channel(self, conn_id: str, channel_id: int) -> ClientChannel:
        ch = ClientChannel(self._sink, conn_id, channel_id, f"{self.client}/{conn_id}")
        ch.open()
        return ch

    def conn_close(self, conn_id: str, error: str | None = None) -> None:
        self._sink("conn_close", {"conn_id": conn_id, "error": error,
                                  "emitter": f"{self.client}/{conn_id}"})

    def drain_start(self) -> None:
        self._sink("drain_start", {"emitter": self.client})

    def drain_end(self, ok: bool) -> None:
        self._sink("drain_end", {"emitter": self.client, "outcome": "ok" if ok else "fail"})
