"""The management listener and the Prometheus listener, as a child of the node.

gevent's `WSGIServer` serves both on the node's hub: each request is a greenlet,
so a slow request never blocks the broker. The handler keeps the request path
percent-encoded, so ``/api/queues/%2F/q`` keeps the vhost ``/`` in one segment.
A port of 0 takes a free one; the bound ports are on the `BrokerNode`.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response
from gevent.pywsgi import WSGIHandler, WSGIServer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import actors
from actors.gen_server import GenServer
from broker.node import BrokerNode
from management.app import make_app
from management.metrics import registry

__all__ = ["ManagementServer", "prometheus_app"]

log = logging.getLogger("warren.management")


class _RawPathHandler(WSGIHandler):
    def get_environ(self) -> dict[str, Any]:
        env = super().get_environ()
        env["PATH_INFO"] = self.path.split("?", 1)[0]
        return env


def prometheus_app(broker: BrokerNode) -> Flask:
    app = Flask("warren.prometheus")
    aggregated, per_object = registry(broker, False), registry(broker, True)
    app.add_url_rule("/metrics", "metrics", lambda: Response(
        generate_latest(aggregated), mimetype=CONTENT_TYPE_LATEST))
    app.add_url_rule("/metrics/per-object", "per_object", lambda: Response(
        generate_latest(per_object), mimetype=CONTENT_TYPE_LATEST))
    return app


def _serve(host: str, port: int, app: Flask) -> WSGIServer:
    server = WSGIServer((host, port), app, handler_class=_RawPathHandler, log=None)
    server.start()
    return server


class ManagementServer(GenServer):
    """Starts the configured listeners in `init`, stops them in `terminate`. A port
    that cannot be bound stops the node's start, as RabbitMQ's listener does."""

    def init(self, broker: BrokerNode) -> Any:
        from broker.startup import posix_reason

        actors.process_flag("trap_exit", True)
        cfg = broker.config
        servers: list[WSGIServer] = []
        wanted = ((cfg.management_port, make_app), (cfg.prometheus_port, prometheus_app))
        for port, make in wanted:
            if port is None:
                continue
            try:
                servers.append(_serve(cfg.management_listener_ip, port, make(broker)))
            except OSError as exc:
                for s in servers:
                    s.stop()
                return ("stop", ("could_not_start_listener", cfg.management_listener_ip,
                                 port, posix_reason(exc), "HTTP"))
        ports = iter(s.server_port for s in servers)
        broker.management_port = next(ports) if cfg.management_port is not None else None
        broker.prometheus_port = next(ports) if cfg.prometheus_port is not None else None
        log.info("management on %s, prometheus on %s", broker.management_port,
                 broker.prometheus_port)
        return ("ok", servers)

    def terminate(self, _reason: Any, servers: list[WSGIServer]) -> None:
        for s in servers:
            s.stop(timeout=1)

