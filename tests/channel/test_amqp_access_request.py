"""`access.request` (class 30), which old clients still send before using a channel.

RabbitMQ (3.10 and 4.x alike) ignores realms and tickets: every request on an
open channel is answered with `access.request-ok` and ticket 1, and the channel
goes on serving. A request without its arguments is a 501 on the connection,
as for any method whose arguments do not decode. The byte strings below are
the frames a real RabbitMQ 3.10.8 sent back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pamqp import commands as C

from channel.protocol.access_methods import AccessRequest
from channel.protocol.framing import decode_method, encode_method
from tests.channel.conftest import Broker
from tests.channel.test_amqp_raw import Raw

REQUEST_OK_TICKET_1 = bytes.fromhex("01000100000006001e000b0001ce")


@pytest.fixture
def raw(broker: Broker) -> Iterator[Raw]:
    r = Raw(broker.port)
    yield r
    r.close()


def method_frame(channel: int, payload: bytes) -> bytes:
    return b"\x01" + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") \
        + payload + b"\xce"


def test_the_request_decodes_and_encodes_as_rabbitmqs_framing_lays_it_out() -> None:
    # realm "/data", then the bits exclusive, passive, active, write, read
    payload = bytes.fromhex("001e000a052f646174611d")
    request = decode_method(payload)
    assert isinstance(request, AccessRequest)
    assert (request.realm, request.exclusive, request.passive, request.active,
            request.write, request.read) == ("/data", True, False, True, True, True)
    assert encode_method(1, request) == method_frame(1, payload)


@pytest.mark.parametrize("arguments", ["052f646174611d", "001f"])
def test_an_access_request_gets_ticket_1_and_the_channel_goes_on(raw: Raw,
                                                                  arguments: str) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"
    raw.sock.sendall(method_frame(1, bytes.fromhex("001e000a" + arguments)))
    assert raw.recv_raw(len(REQUEST_OK_TICKET_1)) == REQUEST_OK_TICKET_1
    raw.send(C.Queue.Declare(queue="after-access", durable=True), 1)
    assert raw.method().name == "Queue.DeclareOk"


def test_a_request_without_its_arguments_cannot_be_decoded(raw: Raw) -> None:
    raw.handshake()
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"
    raw.sock.sendall(method_frame(1, bytes.fromhex("001e000a")))
    close = raw.method()
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        501, "FRAME_ERROR - cannot decode <<>>", 30, 10)
