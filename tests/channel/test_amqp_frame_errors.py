"""RabbitMQ's answers to broken input, byte for byte, over a raw socket.

A tune-ok the server refuses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from pamqp import commands as C

from channel.config import Config
from tests.channel.conftest import Broker
from tests.channel.test_amqp_raw import Raw


@pytest.fixture
def config() -> Config:
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000)


@pytest.fixture
def raw(broker: Broker) -> Iterator[Raw]:
    r = Raw(broker.port)
    r.sock.settimeout(10)  # a missing answer fails the test instead of hanging it
    yield r
    r.close()


def everything_until_eof(raw: Raw) -> bytes:
    """All bytes the server still sends before it closes the socket."""
    data = raw.buf
    while True:
        try:
            chunk = raw.sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def tune(raw: Raw, frame_max: int, channel_max: int = 2047) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    assert raw.method().name == "Connection.Start"
    raw.send(C.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                  response="\x00guest\x00guest"))
    assert raw.method().name == "Connection.Tune"
    raw.send(C.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0))


def open_channel(raw: Raw, channel: int = 1) -> None:
    raw.send(C.Channel.Open(), channel)
    assert raw.method().name == "Channel.OpenOk"


# ---------------------------------------------------------------- tune-ok


def test_tune_ok_frame_max_of_4096_is_the_floor_and_accepted(raw: Raw) -> None:
    tune(raw, frame_max=4096)
    raw.send(C.Connection.Open(virtual_host="/"))
    assert raw.method().name == "Connection.OpenOk"
    open_channel(raw)


@pytest.mark.parametrize(("frame_max", "channel_max", "text"), [
    (4095, 2047, "negotiated frame_max = 4095 is lower than the minimum allowed value (4096)"),
    (1024, 2047, "negotiated frame_max = 1024 is lower than the minimum allowed value (4096)"),
    (131073, 2047,
     "negotiated frame_max = 131073 is higher than the maximum allowed value (131072)"),
    (0, 2047, "negotiated frame_max = 0 is higher than the maximum allowed value (131072)"),
    (131072, 0,
     "negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (2047)"),
    (131072, 2048,
     "negotiated channel_max = 2048 is higher than the maximum allowed value (2047)"),
])
def test_a_refused_tune_ok_is_logged_and_the_socket_closed_without_a_frame(
        raw: Raw, caplog: pytest.LogCaptureFixture, frame_max: int, channel_max: int,
        text: str) -> None:
    """RabbitMQ (3.10 to 4.2) raises this refusal with the method `connection.tune`,
    which its reader treats as a handshake failure: no connection.close, the
    socket closed after the anti-DoS delay."""
    caplog.set_level(logging.ERROR, logger="warren.reader")
    tune(raw, frame_max=frame_max, channel_max=channel_max)
    raw.send(C.Connection.Open(virtual_host="/"))
    assert everything_until_eof(raw) == b""
    assert f"failed to negotiate connection parameters: {text}" in caplog.text
