"""`free_port`: the port a test node will bind must not be one the kernel hands out to
outgoing sockets, or a ZeroMQ link or a client dialling in between the check and the
node's bind takes it (seen as `Address already in use` on a node's AMQP listener)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from transports import zmq_node
from transports.zmq_node import PORT_RANGE, free_port, port_free

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def test_ports_come_from_below_the_ephemeral_range_and_are_bindable() -> None:
    ports = {free_port() for _ in range(50)}
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)
    assert len(ports) > 1  # drawn at random, not one fixed port
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_the_range_does_not_overlap_this_kernels_ephemeral_ports() -> None:
    low, high = (int(x) for x in EPHEMERAL.read_text().split())
    assert PORT_RANGE[1] <= low or PORT_RANGE[0] > high


def test_a_port_something_listens_on_is_not_free() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert not port_free(busy)


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fresh record of handed-out ports (earlier tests in this process drew some), and a
    # third draw that is free now (another test's node may hold any fixed port)
    monkeypatch.setattr(zmq_node, "_given", set())
    spare = next(p for p in range(*PORT_RANGE) if port_free(p))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        taken.listen()
        draws = iter([busy, busy, spare])

        class Draws:
            def randrange(self, *_: int) -> int:
                return next(draws)

        monkeypatch.setattr(zmq_node, "_ports", Draws())
        assert free_port() == spare


def test_no_free_port_is_an_error_naming_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]

        class Always:
            def randrange(self, *_: int) -> int:
                return busy

        monkeypatch.setattr(zmq_node, "_ports", Always())
        with pytest.raises(OSError, match="no free port in"):
            free_port()


def test_a_port_is_never_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # a cluster's ports are all drawn before any node binds: a repeat would be a clash
    first = free_port()
    real = random.Random()
    repeats = [first, first]

    class Draws:
        def randrange(self, *bounds: int) -> int:
            return repeats.pop() if repeats else real.randrange(*bounds)

    monkeypatch.setattr(zmq_node, "_ports", Draws())
    assert free_port() != first
    assert not repeats  # both repeats were drawn and passed over
