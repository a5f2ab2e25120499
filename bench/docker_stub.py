"""Just enough of Docker's HTTP API for aio-pika's test suite to get its brokers from us.

Why: aio-pika's own tests start RabbitMQ in containers through Docker's API (pull,
create, start, inspect, kill, remove, and `exec rabbitmqctl ...`), and there is no
switch to point them at a broker that is already running. To run that suite
unchanged against warren (or a private RabbitMQ node), this server answers those
calls on a Unix socket (`DOCKER_HOST=unix://...`): each "container" is a broker that
`start_broker` starts on free loopback ports, and killing or removing the container
stops it. `exec` runs `rabbitmqctl <command>` through `ctl`; a broker that has no
such command answers with a non-zero exit code, as a failing exec would.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol


class Broker(Protocol):
    """A running broker a container stands for."""

    amqp_port: int

    def ctl(self, command: str) -> int:
        """Run `rabbitmqctl command` against it; the exit code."""

    def stop(self) -> None: ...


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    # closing waits for the requests in flight: a container still starting then is
    # in `containers` afterwards, to be stopped with the others (one request per
    # connection, so no thread waits on an idle client)
    daemon_threads = False
    block_on_close = True


class DockerStub:
    """A Docker API on `socket_path` whose containers are brokers from `start_broker`."""

    def __init__(self, socket_path: Path, start_broker: Callable[[], Broker]) -> None:
        self.socket_path = socket_path
        self.start_broker = start_broker
        self.containers: dict[str, Broker | None] = {}
        self.execs: dict[str, int] = {}
        self.lock = threading.Lock()
        self._server: _UnixServer | None = None

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket_path}"

    def __enter__(self) -> DockerStub:
        if self.socket_path.exists():
            self.socket_path.unlink()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                stub._dispatch(self, "GET")

            def do_POST(self) -> None:
                stub._dispatch(self, "POST")

            def do_DELETE(self) -> None:
                stub._dispatch(self, "DELETE")

        self._server = _UnixServer(str(self.socket_path), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for cid in list(self.containers):
            self._stop(cid)
        if self.socket_path.exists():
            self.socket_path.unlink()

    # -- the API ----------------------------------------------------------------------

    def _dispatch(self, req: BaseHTTPRequestHandler, method: str) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        body = json.loads(req.rfile.read(length)) if length else {}
        path = re.sub(r"^/v[0-9.]+", "", req.path.split("?", 1)[0])
        try:
            status, answer = self._answer(method, path, body)
        except Exception as exc:  # reported to the client as the daemon would
            status, answer = 500, {"message": repr(exc)}
        data = json.dumps(answer).encode() if answer is not None else b""
        try:
            req.send_response(status)
            req.send_header("Content-Type", "application/json")
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped waiting (killed, or its own timeout): no one to tell

    def _answer(self, method: str, path: str, body: dict[str, Any],
                ) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        match method, parts:
            case "GET", ["_ping"]:
                return 200, None
            case "POST", ["images", "create"]:
                return 200, None
            case "POST", ["containers", "create"]:
                cid = secrets.token_hex(16)
                with self.lock:
                    self.containers[cid] = None
                return 201, {"Id": cid, "Warnings": []}
            case "POST", ["containers", cid, "start"]:
                broker = self.start_broker()
                with self.lock:
                    self.containers[cid] = broker
                return 204, None
            case "GET", ["containers", cid, "json"]:
                running = self.containers[cid]
                port = running.amqp_port if running is not None else 0
                ports = {"5672/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}],
                         # no TLS listener: a port nothing listens on
                         "5671/tcp": [{"HostIp": "127.0.0.1", "HostPort": "1"}]}
                return 200, {"Id": cid, "State": {"Running": running is not None},
                             "NetworkSettings": {"Ports": ports}}
            case "POST", ["containers", cid, ("kill" | "stop")]:
                self._stop(cid)
                return 204, None
            case "DELETE", ["containers", cid]:
                self._stop(cid)
                with self.lock:
                    self.containers.pop(cid, None)
                return 204, None
            case "POST", ["containers", cid, "exec"]:
                eid = secrets.token_hex(16)
                target = self.containers.get(cid)
                cmd = list(body.get("Cmd") or [])
                if target is None or cmd[:1] != ["rabbitmqctl"] or len(cmd) != 2:
                    code = 127
                else:
                    code = target.ctl(cmd[1])
                with self.lock:
                    self.execs[eid] = code
                return 201, {"Id": eid}
            case "POST", ["exec", eid, "start"]:
                return 200, None
            case "GET", ["exec", eid, "json"]:
                return 200, {"Running": False, "ExitCode": self.execs[eid]}
        return 404, {"message": f"no such endpoint: {method} {path}"}

    def _stop(self, cid: str) -> None:
        with self.lock:
            broker = self.containers.get(cid)
            if cid in self.containers:
                self.containers[cid] = None
        if broker is not None:
            broker.stop()


def socket_in(directory: Path) -> Path:
    """A socket path short enough for AF_UNIX (108 bytes) under `directory`."""
    path = directory / "docker.sock"
    if len(os.fsencode(path)) < 100:
        return path
    return Path("/tmp") / f"warren-docker-{secrets.token_hex(4)}.sock"
