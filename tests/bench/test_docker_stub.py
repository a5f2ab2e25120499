"""`bench/docker_stub.py`: the Docker API aio-pika's suite gets its brokers from. A
broker is never left running when the suite ends, even one whose container was
still starting then (the suite killed while waiting for it)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from bench.docker_stub import DockerStub, socket_in


class FakeBroker:
    amqp_port = 5672

    def __init__(self) -> None:
        self.stopped = False

    def ctl(self, command: str) -> int:
        return 0

    def stop(self) -> None:
        self.stopped = True


def call(path: Path, method: str, url: str) -> dict[str, object] | None:
    """One request on the stub's socket; the JSON answer (None if empty)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.sendall(f"{method} {url} HTTP/1.0\r\nContent-Length: 0\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    body = data.split(b"\r\n\r\n", 1)[1]
    return json.loads(body) if body else None


def test_a_container_still_starting_when_the_stub_closes_is_stopped(tmp_path: Path) -> None:
    path = socket_in(tmp_path)
    broker = FakeBroker()
    starting = threading.Event()

    def start() -> FakeBroker:
        # still starting while the stub closes: done once its socket is gone
        starting.set()
        deadline = time.monotonic() + 2
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return broker

    stub = DockerStub(path, start)
    stub.__enter__()
    created = call(path, "POST", "/v1.41/containers/create")
    assert created is not None
    cid = created["Id"]
    client = threading.Thread(target=call, args=(path, "POST", f"/containers/{cid}/start"))
    client.start()
    assert starting.wait(10)
    stub.__exit__(None, None, None)
    client.join(10)
    assert broker.stopped
