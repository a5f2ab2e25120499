"""The HTTP API's routes: RabbitMQ's paths, status codes and JSON bodies.

Flask maps the paths. The server hands each path over still percent-encoded
(`management.server`), so a vhost named ``/`` arrives as ``%2F`` in its own
segment, as RabbitMQ's URLs spell it; each segment is decoded here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import quote, unquote

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from broker import ctl_ops, ctl_queues
from broker.metadata import classic_queues
from broker.node import BrokerNode
from channel.access.auth import User
from management import actions, admin, amqp, auth, definitions, deliveries, health, objects, tree
from management.amqp import AmqpTarget
from management.calls import in_node
from management.errors import HttpError, bad_request, not_found

__all__ = ["make_app"]

log = logging.getLogger("warren.management")

MANAGEMENT_VERSION = "3.10.8"
EXCHANGE_TYPES = ("direct", "fanout", "headers", "topic")


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, mimetype="application/json")


def _body() -> dict[str, Any]:
    raw = request.get_data(as_text=True)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise bad_request("not_json") from None
    if not isinstance(data, dict):
        raise bad_request("not_json")
    return data


class Api:
    """The routes of one node's API; `broker` is the node they read."""

    def __init__(self, broker: BrokerNode) -> None:
        self.broker = broker

    # ------------------------------------------------------------ helpers

    def login(self, level: str = auth.MANAGEMENT) -> tuple[User, str]:
        return auth.authenticate(self.broker.ctx.users, request.headers.get("Authorization"),
                                 level)

    def vhost(self, encoded: str, user: User) -> str:
        name = unquote(encoded)
        if name not in self.broker.view.state.vhosts:
            raise not_found()
        if name not in auth.visible_vhosts(user, [name]):
            raise HttpError(401, "not_authorised",
                            "User not authorised to access virtual host")
        return name

    def visible(self, user: User, encoded: str | None) -> list[str]:
        if encoded is not None:
            return [self.vhost(encoded, user)]
        return auth.visible_vhosts(user, self.broker.view.state.vhosts)

    def target(self, vhost: str, creds: tuple[User, str]) -> AmqpTarget:
        return AmqpTarget(self.broker.config.amqp_host, self.broker.amqp_port, vhost,
                          creds[0].name, creds[1])

    @staticmethod
    def one_row(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
        for row in rows:
            if row["name"] == name:
                return row
        raise not_found()

    # ------------------------------------------------------------ routes

    def overview(self) -> Response:
        self.login()
        b = self.broker
        names = list(b.view.state.vhosts)
        qs = objects.queues(b, names)
        version = b.release.server.version
        ready = sum(q["messages_ready"] for q in qs)
        return _json({
            "management_version": MANAGEMENT_VERSION, "rates_mode": "basic",
            "sample_retention_policies": {"global": [600, 3600, 28800, 86400],
                                          "basic": [600, 3600], "detailed": [600]},
            "release_series_support_status": "supported",
            "product_name": "RabbitMQ", "product_version": version,
            "rabbitmq_version": version, "cluster_name": b.config.amqp.get(
                "cluster_name", b.node.name), "erlang_version": "warren",
            "erlang_full_version": "warren (Python)", "disable_stats": False,
            "enable_queue_totals": False, "node": b.node.name,
            "exchange_types": [{"name": t, "description": "", "enabled": True}
                               for t in EXCHANGE_TYPES],
            "message_stats": {}, "churn_rates": {}, "statistics_db_event_queue": 0,
            "queue_totals": {"messages": ready, "messages_ready": ready,
                             "messages_unacknowledged": 0},
            "object_totals": {"queues": len(qs),
                              "exchanges": len(objects.exchanges(b, names)),
                              "connections": len(b.ctx.readers),
                              "channels": b.open_channels(),
                              "consumers": sum(q["consumers"] for q in qs)},
            "listeners": [{"node": b.node.name, "protocol": "amqp",
                           "ip_address": b.config.amqp_host, "port": b.amqp_port,
                           "socket_opts": {}}],
            "contexts": [{"node": b.node.name, "description": "RabbitMQ Management",
                          "path": "/", "port": str(b.config.management_port)}]})

    def nodes(self, name: str | None = None) -> Response:
        self.login(auth.MONITOR)
        rows = [objects.node_row(self.broker, n) for n in self.broker.config.all_nodes]
        return _json(rows) if name is None else _json(self.one_row(rows, unquote(name)))

    def vhosts(self, vhost: str | None = None) -> Response:
        user, _ = self.login()
        rows = objects.vhosts(self.broker, self.visible(user, vhost))
        return _json(rows) if vhost is None else _json(rows[0])

    def vhost_put(self, vhost: str) -> Response:
        """Create a vhost (201), or leave one that exists as it is (204); DELETE
        deletes it with its queues (204), or answers 404."""
        self.login(auth.ADMIN)
        name = unquote(vhost)
        existed = name in self.broker.view.state.vhosts
        if request.method == "DELETE":
            if not existed:
                raise not_found()
            in_node(self.broker.node, ctl_queues.delete_vhost, name)
            return Response(status=204)
        body = _body()
        in_node(self.broker.node, ctl_queues.add_vhost, name,
                body.get("default_queue_type"), body.get("description"),
                body.get("tags") if isinstance(body.get("tags"), str) else
                ",".join(body.get("tags") or []))
        return Response(status=204 if existed else 201)

    def users(self, name: str | None = None) -> Response:
        self.login(auth.ADMIN)
        users = self.broker.view.state.users
        if name is None:
            return _json([objects.user_row(u) for _n, u in sorted(users.items())])
        user = users.get(unquote(name))
        if user is None:
            raise not_found()
        return _json(objects.user_row(user))

    def user_write(self, name: str) -> Response:
        self.login(auth.ADMIN)
        if request.method == "PUT":
            return Response(status=admin.put_user(self.broker, unquote(name), _body()))
        return Response(status=admin.delete_user(self.broker, unquote(name)))

    def permissions(self) -> Response:
        self.login(auth.ADMIN)
        return _json(objects.permissions(self.broker))

    def user_permissions(self, name: str) -> Response:
        self.login(auth.ADMIN)
        user = unquote(name)
        if user not in self.broker.view.state.users:
            raise not_found()
        return _json([p for p in objects.permissions(self.broker) if p["user"] == user])

    def vhost_permissions(self, vhost: str) -> Response:
        user, _ = self.login(auth.ADMIN)
        vh = self.vhost(vhost, user)
        return _json([p for p in objects.permissions(self.broker) if p["vhost"] == vh])

    def permission(self, vhost: str, name: str) -> Response:
        self.login(auth.ADMIN)
        vh, user = unquote(vhost), unquote(name)
        if request.method == "PUT":
            return Response(status=admin.put_permissions(self.broker, vh, user, _body()))
        if request.method == "DELETE":
            return Response(status=admin.clear_permissions(self.broker, vh, user))
        for p in objects.permissions(self.broker):
            if (p["vhost"], p["user"]) == (vh, user):
                return _json(p)
        raise not_found()

    def queues(self, vhost: str | None = None, name: str | None = None) -> Response:
        creds = self.login()
        names = self.visible(creds[0], vhost)
        if name is None:
            return _json(objects.queues(self.broker, names))
        qname = unquote(name)
        exists = objects.queue_exists(self.broker, names[0], qname)
        if request.method == "PUT":
            actions.declare_queue(self.target(names[0], creds), qname, _body())
            return Response(status=204 if exists else 201)
        if not exists:
            raise not_found()
        if request.method == "DELETE":
            actions.delete_queue(self.target(names[0], creds), qname,
                                 request.args.get("if-unused") == "true",
                                 request.args.get("if-empty") == "true")
            return Response(status=204)
        row = self.one_row(objects.queues(self.broker, names), qname)
        return _json({**row, "consumer_details": [], "deliveries": [], "incoming": []})

    def queue_known(self, vhost: str, name: str, user: User) -> tuple[str, str]:
        """The vhost and queue named in the path; 404 when either does not exist."""
        vh, qname = self.vhost(vhost, user), unquote(name)
        if not objects.queue_exists(self.broker, vh, qname):
            raise not_found()
        return vh, qname

    def queue_contents(self, vhost: str, name: str) -> Response:
        creds = self.login()
        vh, qname = self.queue_known(vhost, name, creds[0])
        actions.purge(self.target(vh, creds), qname)
        return Response(status=204)

    def queue_get(self, vhost: str, name: str) -> Response:
        creds = self.login()
        vh, qname = self.queue_known(vhost, name, creds[0])
        return _json(actions.get(self.target(vh, creds), qname, _body()))

    def exchanges(self, vhost: str | None = None, name: str | None = None) -> Response:
        creds = self.login()
        names = self.visible(creds[0], vhost)
        if name is None:
            return _json(objects.exchanges(self.broker, names))
        xname = _exchange_name(name)
        exists = objects.exchange_exists(self.broker, names[0], xname)
        if request.method == "PUT":
            actions.declare_exchange(self.target(names[0], creds), xname, _body())
            return Response(status=204 if exists else 201)
        if not exists:
            raise not_found()
        if request.method == "DELETE":
            actions.delete_exchange(self.target(names[0], creds), xname,
                                    request.args.get("if-unused") == "true")
            return Response(status=204)
        row = self.one_row(objects.exchanges(self.broker, names), xname)
        return _json({**row, "incoming": [], "outgoing": []})

    def exchange_publish(self, vhost: str, name: str) -> Response:
        creds = self.login()
        target = self.target(self.vhost(vhost, creds[0]), creds)
        return _json({"routed": actions.publish(target, _exchange_name(name), _body())})

    def bindings(self, vhost: str | None = None) -> Response:
        user, _ = self.login()
        return _json(objects.bindings(self.broker, self.visible(user, vhost)))

    def binding_create(self, vhost: str, source: str, kind: str, dest: str) -> Response:
        creds = self.login()
        target = self.target(self.vhost(vhost, creds[0]), creds)
        if request.method == "GET":
            rows = [b for b in objects.bindings(self.broker, [target.vhost])
                    if b["source"] == _exchange_name(source) and b["destination"] ==
                    unquote(dest) and b["destination_type"][0] == kind]
            return _json(rows)
        body = _body()
        actions.bind(target, _exchange_name(source), kind, unquote(dest), body)
        key = objects.props_key(str(body.get("routing_key", "")), {})
        # RabbitMQ's Location is the new binding's URL relative to this one's:
        # the destination segment, then the quoted properties key
        location = f"{quote(unquote(dest), safe='')}/{quote(unquote(key), safe='~')}"
        return Response(status=201, headers={"Location": location})

    def binding_delete(self, vhost: str, source: str, kind: str, dest: str,
                       props: str) -> Response:
        creds = self.login()
        target = self.target(self.vhost(vhost, creds[0]), creds)
        key = unquote(props)
        actions.unbind(target, _exchange_name(source), kind, unquote(dest),
                       "" if key == "~" else key)
        return Response(status=204)

    def connections(self) -> Response:
        user, _ = self.login()
        rows = objects.connections(self.broker)
        return _json([r for r in rows if auth.can_see_all(user) or r["user"] == user.name])

    def channels(self) -> Response:
        self.login()
        return _json(objects.channels(self.broker))

    def consumers(self, vhost: str | None = None) -> Response:
        """The quorum queues' consumers, read from each queue's leader, then the
        classic queues' consumers, read from each queue's process."""
        user, _ = self.login()
        rows = []
        names = objects.channel_names(self.broker)
        classic = classic_queues(self.broker.view.state)
        for vh in self.visible(user, vhost):
            for r in self.broker.registry.list(vh):
                rows += [objects.consumer_row(vh, r.name, c, names) for c in in_node(
                    self.broker.node, deliveries.consumers, vh, r.name)]
            for qvh, qname in sorted(classic):
                if qvh == vh:
                    rows += [objects.classic_consumer_row(vh, qname, c, names)
                             for c in in_node(self.broker.node, ctl_queues.classic_consumers,
                                              vh, qname)]
        return _json(rows)

    def queue_consumers(self, vhost: str, name: str) -> Response:
        """A quorum queue's consumers with the member that delivers to each."""
        creds = self.login()
        vh, qname = self.queue_known(vhost, name, creds[0])
        if (vh, qname) not in self.broker.view.state.queues:
            raise not_found()
        return _json(in_node(self.broker.node, deliveries.consumers, vh, qname))

    def policies(self, vhost: str | None = None) -> Response:
        user, _ = self.login()
        return _json(objects.policies(self.broker, self.visible(user, vhost)))

    def policy(self, vhost: str, name: str) -> Response:
        user, _ = self.login(auth.POLICYMAKER)
        vh, pname = self.vhost(vhost, user), unquote(name)
        if request.method == "PUT":
            return Response(status=admin.put_policy(self.broker, vh, pname, _body()))
        if request.method == "DELETE":
            return Response(status=admin.clear_policy(self.broker, vh, pname))
        return _json(self.one_row(objects.policies(self.broker, [vh]), pname))

    def definitions(self) -> Response:
        user, password = self.login(auth.ADMIN)
        if request.method == "POST":
            definitions.load(self.broker, _body(), user.name, password)
            return Response(status=204)
        return _json(definitions.export(self.broker))

    def alarms(self, local: bool) -> Response:
        self.login()
        status, body = health.alarms(self.broker, local)
        return _json(body, status)

    def quorum_critical(self) -> Response:
        self.login()
        status, body = health.quorum_critical(self.broker)
        return _json(body, status)

    def page(self) -> Response:
        """The live page: one file, no build step; it logs in and reads this API."""
        html = resources.files("management").joinpath("static/index.html").read_bytes()
        return Response(html, mimetype="text/html")

    def supervision(self) -> Response:
        self.login()
        return _json(in_node(self.broker.node, tree.supervision_tree))

    def members(self, vhost: str, name: str) -> Response:
        """A quorum queue's Ra members as `warren ctl quorum_status` lists them."""
        creds = self.login()
        vh, qname = self.queue_known(vhost, name, creds[0])
        if (vh, qname) not in self.broker.view.state.queues:
            raise not_found()
        return _json(in_node(self.broker.node, ctl_ops.quorum_status, vh, qname))

    def aliveness(self, vhost: str) -> Response:
        creds = self.login()
        target = self.target(self.vhost(vhost, creds[0]), creds)
        if not self.broker.release.aliveness_test_declares_queue:
            amqp.run(target, lambda _ch: None)  # a channel on the vhost opens: ok
            return _json({"status": "ok"})
        actions.declare_queue(target, "aliveness-test", {"durable": False})
        actions.publish(target, "", {"routing_key": "aliveness-test", "properties": {},
                                     "payload": "test_message", "payload_encoding": "string"})
        got = actions.get(target, "aliveness-test", {"ackmode": "ack_requeue_false"})
        if not got:
            return _json({"status": "failed", "reason": "no message"}, 503)
        return _json({"status": "ok"})


def _exchange_name(encoded: str) -> str:
    name = unquote(encoded)
    return "" if name == "amq.default" else name


def _route(app: Flask, rule: str, view: Callable[..., Response],
           methods: tuple[str, ...] = ("GET",), **defaults: Any) -> None:
    app.add_url_rule(rule, f"{view.__name__}:{rule}", view, methods=list(methods),
                     defaults=defaults or None)


def make_app(broker: BrokerNode) -> Flask:
    """The WSGI application of `broker`'s management API."""
    app = Flask("warren.management")
    api = Api(broker)
    rw = ("GET", "PUT", "DELETE")
    _route(app, "/", api.page)
    _route(app, "/api/overview", api.overview)
    _route(app, "/api/warren/supervision", api.supervision)
    _route(app, "/api/warren/queues/<vhost>/<name>/members", api.members)
    _route(app, "/api/warren/queues/<vhost>/<name>/consumers", api.queue_consumers)
    _route(app, "/api/nodes", api.nodes)
    _route(app, "/api/nodes/<name>", api.nodes)
    _route(app, "/api/vhosts", api.vhosts)
    _route(app, "/api/vhosts/<vhost>", api.vhosts)
    _route(app, "/api/vhosts/<vhost>", api.vhost_put, ("PUT", "DELETE"))
    _route(app, "/api/users", api.users)
    _route(app, "/api/users/<name>", api.users)
    _route(app, "/api/users/<name>", api.user_write, ("PUT", "DELETE"))
    _route(app, "/api/users/<name>/permissions", api.user_permissions)
    _route(app, "/api/permissions", api.permissions)
    _route(app, "/api/permissions/<vhost>/<name>", api.permission, rw)
    _route(app, "/api/vhosts/<vhost>/permissions", api.vhost_permissions)
    _route(app, "/api/queues", api.queues)
    _route(app, "/api/queues/<vhost>", api.queues)
    _route(app, "/api/queues/<vhost>/<name>", api.queues, rw)
    _route(app, "/api/queues/<vhost>/<name>/contents", api.queue_contents, ("DELETE",))
    _route(app, "/api/queues/<vhost>/<name>/get", api.queue_get, ("POST",))
    _route(app, "/api/exchanges", api.exchanges)
    _route(app, "/api/exchanges/<vhost>", api.exchanges)
    _route(app, "/api/exchanges/<vhost>/<name>", api.exchanges, rw)
    _route(app, "/api/exchanges/<vhost>/<name>/publish", api.exchange_publish, ("POST",))
    _route(app, "/api/bindings", api.bindings)
    _route(app, "/api/bindings/<vhost>", api.bindings)
    _route(app, "/api/bindings/<vhost>/e/<source>/<any(q, e):kind>/<dest>",
           api.binding_create, ("GET", "POST"))
    _route(app, "/api/bindings/<vhost>/e/<source>/<any(q, e):kind>/<dest>/<props>",
           api.binding_delete, ("DELETE",))
    _route(app, "/api/connections", api.connections)
    _route(app, "/api/channels", api.channels)
    _route(app, "/api/consumers", api.consumers)
    _route(app, "/api/consumers/<vhost>", api.consumers)
    _route(app, "/api/policies", api.policies)
    _route(app, "/api/policies/<vhost>", api.policies)
    _route(app, "/api/policies/<vhost>/<name>", api.policy, rw)
    _route(app, "/api/definitions", api.definitions, ("GET", "POST"))
    _route(app, "/api/health/checks/alarms", api.alarms, local=False)
    _route(app, "/api/health/checks/local-alarms", api.alarms, local=True)
    _route(app, "/api/health/checks/node-is-quorum-critical", api.quorum_critical)
    _route(app, "/api/aliveness-test/<vhost>", api.aliveness)

    @app.errorhandler(HttpError)
    def _refused(exc: HttpError) -> Response:
        body = exc.body()
        response = Response(status=exc.status) if body is None else _json(body, exc.status)
        if exc.status == 401 and exc.error != "not_authorised":
            response.headers["WWW-Authenticate"] = 'Basic realm="RabbitMQ Management"'
        return response

    @app.errorhandler(ctl_ops.CtlError)
    def _ctl_refused(exc: ctl_ops.CtlError) -> Response:
        return _json(bad_request(str(exc)).body(), 400)

    @app.errorhandler(404)
    def _no_route(_exc: Any) -> Response:
        return _json(not_found().body(), 404)

    @app.errorhandler(405)
    def _no_method(_exc: Any) -> Response:
        return _json({"error": "Method Not Allowed", "reason": "Method Not Allowed"}, 405)

    @app.errorhandler(Exception)
    def _crashed(exc: Exception) -> Any:
        """A request that failed inside: logged, answered 500 with no body (as
        RabbitMQ's crashed request handlers answer)."""
        if isinstance(exc, HTTPException):
            return exc
        log.exception("management request %s %s failed", request.method, request.path)
        return Response(status=500)

    return app
