"""`bench/client_suites.py`'s brokers: warren's node models the release its reference
runs, and a RabbitMQ 4.0.5 node from the Debian 13 chroot stands in for aio-pika's
containers as the installed RabbitMQ's does (the suites themselves need network and
are not run here)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pika
import pika.exceptions
import pytest

from bench.client_suites import BROKERS, factories, main
from transports.zmq_node import free_port


@contextmanager
def started(kind: str, base: Path, release: str | None = None) -> Iterator[int]:
    """A broker of `kind` as a suite gets it; its AMQP port."""
    node = factories(release)[kind](base, free_port())
    try:
        node.start()
        yield node.amqp_port
    finally:
        node.stop()


def server_version(port: int) -> str:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, connection_attempts=1))
    try:
        version = conn._impl.server_properties["version"]
    finally:
        conn.close()
    return version.decode() if isinstance(version, bytes) else str(version)


def test_warren_s_node_models_the_release_given(tmp_path: Path) -> None:
    with started("warren", tmp_path, release="3.10") as port:
        assert server_version(port) == "3.10.8"


def test_a_release_warren_does_not_model_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--rabbitmq-version", "3.9", "--no-netns"])
    assert exit_.value.code == 2


def test_a_rabbitmq_4_0_5_node_stops_and_starts_its_app_as_aio_pika_asks(
        tmp_path: Path) -> None:
    """aio-pika's suite runs `rabbitmqctl stop_app` / `start_app` in its container."""
    assert "rabbitmq4" in BROKERS
    node = factories(None)["rabbitmq4"](tmp_path, free_port())
    try:
        node.start()
        assert server_version(node.amqp_port) == "4.0.5"
        assert node.ctl("stop_app") == 0
        with pytest.raises(pika.exceptions.AMQPConnectionError):
            server_version(node.amqp_port)
        assert node.ctl("start_app") == 0
        assert server_version(node.amqp_port) == "4.0.5"
        assert node.ctl("no_such_command") != 0
    finally:
        node.stop()
