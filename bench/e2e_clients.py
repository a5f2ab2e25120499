"""The two AMQP clients of ``bench/e2e.py``, each run as an OS process of its own.

Both are plain pika ``SelectConnection`` clients — nothing warren-specific — so the
same code measures warren and any AMQP 0-9-1 broker. The protocol with the parent
is line based: the client prints ``ready`` once its channel is set up (confirms
selected / consumer registered), then reads one line ``run T0 T1`` on stdin, where
``T0`` and ``T1`` are ``time.monotonic()`` instants (``CLOCK_MONOTONIC`` is system
wide on Linux, so the parent and both clients share one clock). The publisher starts
publishing at once (the time before ``T0`` is the warm-up); both count only what
happens in ``[T0, T1)`` and print one line ``result {json}`` at the end.

* publisher: persistent messages (``delivery_mode`` 2, or transient ones with
  ``--delivery-mode 1``) to the default exchange, publisher confirms with at most
  ``--window`` unconfirmed; every confirm's latency (publish to ``basic.ack``) of a
  message published in the window is kept.
* consumer: ``basic.qos`` prefetch ``--prefetch``, manual ``basic.ack`` of each
  delivery (not ``multiple``), as a typical application consumer.

    python bench/e2e_clients.py publisher URL QUEUE --size 16 --window 256 [--delivery-mode 1]
    python bench/e2e_clients.py consumer URL QUEUE --prefetch 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import pika
import pika.spec
from pika.adapters.select_connection import IOLoop

#: after T1 the publisher waits this long for confirms of messages sent in the window
CONFIRM_GRACE_S = 3.0
#: give up when no ``run`` line arrives (the parent died)
START_TIMEOUT_S = 120.0


class _Client:
    """Connect, open a channel, say ``ready``, wait for ``run T0 T1``, stop after T1."""

    def __init__(self, url: str, queue: str) -> None:
        self.params = pika.URLParameters(url)
        self.queue = queue
        self.ioloop = IOLoop()
        self.conn: pika.SelectConnection | None = None
        self.channel: Any = None
        self.t0 = self.t1 = float("inf")
        self.started = False
        self.error: str | None = None
        self._stdin = b""

    def run(self) -> dict[str, Any]:
        self.conn = pika.SelectConnection(
            self.params, on_open_callback=self._on_open,
            on_open_error_callback=lambda _c, err: self._fail(f"connect: {err!r}"),
            on_close_callback=self._on_closed, custom_ioloop=self.ioloop)
        self.ioloop.call_later(START_TIMEOUT_S, self._start_timeout)
        self.ioloop.start()
        if self.error is not None:
            raise SystemExit(f"{type(self).__name__.lower()}: {self.error}")
        return self.result()

    # ------------------------------------------------------------- plumbing

    def _fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
        self.ioloop.stop()

    def _on_open(self, conn: pika.SelectConnection) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_closed(self, _conn: Any, reason: Any) -> None:
        if self.error is None and not self._finished():
            self.error = f"connection closed: {reason!r}"
        self.ioloop.stop()

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.add_on_close_callback(
            lambda _ch, reason: None if self._finished() else self._fail(f"channel: {reason!r}"))
        self.setup(channel)

    def _ready(self) -> None:
        """The channel is set up: tell the parent and wait for the run line."""
        print("ready", flush=True)
        self.ioloop.add_handler(sys.stdin.fileno(), self._on_stdin, self.ioloop.READ)

    def _on_stdin(self, fd: int, _events: int) -> None:
        data = os.read(fd, 4096)
        if not data:  # the parent went away
            self.ioloop.remove_handler(fd)
            self._fail("stdin closed before run")
            return
        self._stdin += data
        if b"\n" not in self._stdin:
            return
        self.ioloop.remove_handler(fd)
        word, t0, t1 = self._stdin.split(b"\n", 1)[0].decode().split()
        assert word == "run", word
        self.t0, self.t1 = float(t0), float(t1)
        self.started = True
        self.ioloop.call_later(max(0.0, self.t1 - time.monotonic()), self.at_end)
        self.start()

    def _start_timeout(self) -> None:
        if not self.started:
            self._fail("no run line from the parent")

    def _finished(self) -> bool:
        return self.started and time.monotonic() >= self.t1

    def close(self) -> None:
        conn = self.conn
        if conn is not None and conn.is_open:
            conn.close()
        else:
            self.ioloop.stop()

    # --------------------------------------------------------------- roles

    def setup(self, channel: Any) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def at_end(self) -> None:
        raise NotImplementedError

    def result(self) -> dict[str, Any]:
        raise NotImplementedError


class Publisher(_Client):
    """Publishes (persistent unless `delivery_mode` is 1) with at most ``window``
    unconfirmed."""

    def __init__(self, url: str, queue: str, size: int, window: int,
                 delivery_mode: int = 2) -> None:
        super().__init__(url, queue)
        self.body = b"x" * size
        self.window = window
        self.props = pika.BasicProperties(delivery_mode=delivery_mode)
        self.seq = 0  # delivery tag of the last publish (confirm mode counts from 1)
        self.lowest = 1  # the lowest tag that may still be pending
        self.pending: dict[int, float] = {}  # tag -> monotonic publish time
        self.confirmed = 0  # in the window
        self.nacked = 0
        self.latencies_ms: list[float] = []
        self.stopped = False

    def setup(self, channel: Any) -> None:
        channel.confirm_delivery(ack_nack_callback=self._on_confirm,
                                 callback=lambda _frame: self._ready())

    def start(self) -> None:
        self._fill()

    def _fill(self) -> None:
        publish, queue, body, props = self.channel.basic_publish, self.queue, self.body, self.props
        pending = self.pending
        while len(pending) < self.window and not self.stopped:
            now = time.monotonic()
            if now >= self.t1:
                self.stopped = True
                break
            self.seq += 1
            pending[self.seq] = now
            publish("", queue, body, props)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = int(method.delivery_tag)
        now = time.monotonic()
        acked = isinstance(method, pika.spec.Basic.Ack)
        tags = range(self.lowest, tag + 1) if method.multiple else (tag,)
        t0, t1 = self.t0, self.t1
        for t in tags:
            sent = self.pending.pop(t, None)
            if sent is None or not t0 <= sent < t1:
                continue
            if not acked:
                self.nacked += 1
                continue
            self.latencies_ms.append((now - sent) * 1000.0)
            if now < t1:
                self.confirmed += 1
        while self.lowest <= self.seq and self.lowest not in self.pending:
            self.lowest += 1
        if self.stopped:
            if not any(t0 <= s < t1 for s in self.pending.values()):
                self.close()
        else:
            self._fill()

    def at_end(self) -> None:
        self.stopped = True
        if not any(self.t0 <= s < self.t1 for s in self.pending.values()):
            self.close()
        else:
            self.ioloop.call_later(CONFIRM_GRACE_S, self.close)

    def result(self) -> dict[str, Any]:
        in_window = sum(1 for s in self.pending.values() if self.t0 <= s < self.t1)
        return {"confirmed": self.confirmed, "nacked": self.nacked,
                "unconfirmed_at_end": in_window, "published_total": self.seq,
                "seconds": self.t1 - self.t0, "latencies_ms": self.latencies_ms}


class Consumer(_Client):
    """Manual acks, one ``basic.ack`` per delivery, ``prefetch`` unacked at most."""

    def __init__(self, url: str, queue: str, prefetch: int) -> None:
        super().__init__(url, queue)
        self.prefetch = prefetch
        self.received = 0  # in the window
        self.total = 0
        self.redelivered = 0

    def setup(self, channel: Any) -> None:
        channel.basic_qos(prefetch_count=self.prefetch, callback=lambda _f: self._consume())

    def _consume(self) -> None:
        self.channel.basic_consume(self.queue, self._on_message, auto_ack=False,
                                   callback=lambda _f: self._ready())

    def _on_message(self, channel: Any, method: Any, _props: Any, _body: bytes) -> None:
        channel.basic_ack(method.delivery_tag)
        self.total += 1
        if method.redelivered:
            self.redelivered += 1
        if self.started and self.t0 <= time.monotonic() < self.t1:
            self.received += 1

    def start(self) -> None:
        pass

    def at_end(self) -> None:
        self.close()

    def result(self) -> dict[str, Any]:
        return {"received": self.received, "received_total": self.total,
                "redelivered": self.redelivered, "seconds": self.t1 - self.t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("role", choices=["publisher", "consumer"])
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--prefetch", type=int, default=300)
    parser.add_argument("--delivery-mode", type=int, choices=(1, 2), default=2,
                        help="2: persistent messages, 1: transient ones")
    args = parser.parse_args(argv)
    client: _Client
    if args.role == "publisher":
        client = Publisher(args.url, args.queue, args.size, args.window,
                           args.delivery_mode)
    else:
        client = Consumer(args.url, args.queue, args.prefetch)
    print("result " + json.dumps(client.run()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
