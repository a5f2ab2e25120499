"""The reader against a hand-driven socket: headers, frame errors, heartbeats, limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gevent
import pytest
from gevent import socket
from pamqp import commands as C
from pamqp import frame as pframe
from pamqp.heartbeat import Heartbeat

from channel.connection.config import Config
from tests.channel.conftest import Broker
from tests.waiting import hub_wait_until


class Raw:
    """A minimal AMQP client on a gevent socket (same hub as the broker)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, obj: Any, channel: int = 0) -> None:
        self.sock.sendall(pframe.marshal(obj, channel))

    def recv_raw(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                break
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self) -> tuple[int, Any]:
        while True:
            try:
                n, channel, obj = pframe.unmarshal(self.buf)
            except Exception:
                data = self.sock.recv(65536)
                if not data:
                    raise EOFError("closed") from None
                self.buf += data
                continue
            self.buf = self.buf[n:]
            return channel, obj

    def method(self) -> Any:
        while True:
            _, obj = self.frame()
            if not isinstance(obj, Heartbeat):
                return obj

    def closed(self) -> bool:
        """True once the server has closed the socket (reads until EOF)."""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return True

    def handshake(self, heartbeat: int = 0, channel_max: int = 2047,
                  capabilities: dict[str, Any] | None = None) -> None:
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        assert self.method().name == "Connection.Start"
        self.send(C.Connection.StartOk(
            client_properties={"capabilities": capabilities or {}},
            mechanism="PLAIN", response="\x00guest\x00guest"))
        tune = self.method()
        assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)
        self.send(C.Connection.TuneOk(channel_max=channel_max, frame_max=131072,
                                      heartbeat=heartbeat))
        self.send(C.Connection.Open(virtual_host="/"))
        assert self.method().name == "Connection.OpenOk"

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(broker: Broker) -> Iterator[Raw]:
    r = Raw(broker.port)
    yield r
    r.close()


@pytest.mark.parametrize("header", [b"AMQP\x00\x00\x09\x02", b"GET / HTTP/1.1\r\n",
                                    b"AMQP\x03\x01\x00\x00", b"\x16\x03\x01\x00\x00\x00\x00\x00"])
def test_bad_protocol_header_gets_the_0_9_1_header_and_close(raw: Raw, header: bytes) -> None:
    raw.sock.sendall(header)
    assert raw.recv_raw(8) == b"AMQP\x00\x00\x09\x01"
    assert raw.closed()


def test_accepted_sockets_have_nagle_off_as_rabbitmq_nodelay_default(broker: Broker,
                                                                   raw: Raw) -> None:
    raw.handshake()
    hub_wait_until(lambda: len(broker.listener.readers) == 1, "the reader to register")
    server_side = broker.only_reader().wire.sock
    assert server_side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_start_offers_mechanisms_and_capabilities(raw: Raw) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    start = raw.method()
    assert (start.version_major, start.version_minor) == (0, 9)
    assert start.mechanisms == "PLAIN AMQPLAIN"
    assert start.locales == "en_US"
    caps = start.server_properties["capabilities"]
    assert all(caps[k] is True for k in ("publisher_confirms", "basic.nack",
                                         "connection.blocked", "consumer_cancel_notify",
                                         "authentication_failure_close"))


def test_frame_larger_than_frame_max_is_fatal(raw: Raw) -> None:
    raw.handshake()
    raw.sock.sendall(b"\x01\x00\x01" + (131073).to_bytes(4, "big"))
    close = raw.method()
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        501, "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,131073,131064}", 0, 0)
    assert raw.closed()


def test_bad_frame_end_marker_is_fatal(raw: Raw) -> None:
    raw.handshake()
    raw.sock.sendall(pframe.marshal(C.Channel.Open(), 1)[:-1] + b"\x00")
    close = raw.method()
    assert close.reply_text == ("FRAME_ERROR - type 1, all octets = <<0,20,0,10,1,48>>: "
                                "{invalid_frame_end_marker,0}")


def test_heartbeat_on_a_channel_is_505(raw: Raw) -> None:
    raw.handshake()
    raw.sock.sendall(b"\x08\x00\x01\x00\x00\x00\x00\xce")
    close = raw.method()
    assert (close.reply_code, close.reply_text) == (
        505, "UNEXPECTED_FRAME - type 8, all octets = <<>>")
    raw.send(C.Connection.CloseOk())
    assert raw.closed()


def test_first_method_on_a_channel_must_be_channel_open(raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Basic.Qos(prefetch_count=1), 1)
    close = raw.method()
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        504, "CHANNEL_ERROR - expected 'channel.open'", 60, 10)


def test_second_channel_open_is_504(raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"
    raw.send(C.Channel.Open(), 1)
    close = raw.method()
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)


def test_channel_count_is_limited_by_negotiated_channel_max(raw: Raw) -> None:
    raw.handshake(channel_max=2)
    for n in (5, 900):  # channel numbers are not compared, only the count
        raw.send(C.Channel.Open(), n)
        assert raw.method().name == "Channel.OpenOk"
    raw.send(C.Channel.Open(), 3)
    close = raw.method()
    assert (close.reply_code, close.reply_text) == (
        530, "NOT_ALLOWED - number of channels opened (2) has reached the negotiated "
             "channel_max (2)")


def test_channel_close_handshake_frees_the_number(raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"
    raw.send(C.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 1)
    assert raw.method().name == "Channel.CloseOk"
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"


def test_server_channel_close_waits_for_close_ok(broker: Broker, raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    raw.method()
    raw.send(C.Exchange.Declare(exchange="nope", passive=True), 1)
    close = raw.method()
    assert (close.reply_code, close.class_id, close.method_id) == (404, 40, 10)
    raw.send(C.Queue.Declare(queue="ignored"), 1)  # ignored while closing
    raw.send(C.Channel.CloseOk(), 1)
    raw.send(C.Channel.Open(), 1)
    channel, opened = raw.frame()
    assert (channel, opened.name) == (1, "Channel.OpenOk")
    assert broker.backend.queue("/", "ignored") is None


def test_client_connection_close_gets_close_ok(raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    raw.method()
    raw.send(C.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    assert raw.method().name == "Connection.CloseOk"


def test_auth_failure_without_the_capability_just_closes(raw: Raw) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    raw.method()
    raw.send(C.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                  response="\x00guest\x00bad"))
    assert raw.closed()
    assert raw.buf == b""


def test_tune_ok_below_the_minimum_frame_max_closes_without_open_ok(raw: Raw) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    raw.method()
    raw.send(C.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                  response="\x00guest\x00guest"))
    raw.method()
    raw.send(C.Connection.TuneOk(channel_max=10, frame_max=4095, heartbeat=0))
    raw.send(C.Connection.Open(virtual_host="/"))
    assert raw.closed()
    assert raw.buf == b""


@pytest.fixture
def config() -> Config:
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000, heartbeat=60)


def test_silent_client_is_dropped_after_missed_heartbeats(broker: Broker, raw: Raw) -> None:
    raw.handshake(heartbeat=1)
    _, frame = raw.frame()  # the server's first heartbeat comes at once (H/2)
    assert isinstance(frame, Heartbeat)
    assert raw.closed()  # no connection.close frame before the socket goes
    hub_wait_until(lambda: not broker.listener.readers, "reader gone")


def test_heartbeats_from_the_client_keep_the_connection(broker: Broker, raw: Raw) -> None:
    raw.handshake(heartbeat=1)
    for _ in range(6):
        raw.sock.sendall(b"\x08\x00\x00\x00\x00\x00\x00\xce")
        gevent.sleep(0.5)
    assert len(broker.listener.readers) == 1
