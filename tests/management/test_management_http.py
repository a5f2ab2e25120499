"""The HTTP API answers as RabbitMQ's management plugin: status codes and bodies."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pika

from tests.broker.broker_support import COOKIE, ctl, eventually
from tests.management.conftest import Managed


def call(m: Managed, method: str, path: str, body: Any = None,
         auth: tuple[str, str] | None = ("guest", "guest"),
         raw: bytes | None = None) -> tuple[int, Any]:
    return call_with_headers(m, method, path, body, auth, raw)[:2]


def call_with_headers(m: Managed, method: str, path: str, body: Any = None,
                      auth: tuple[str, str] | None = ("guest", "guest"),
                      raw: bytes | None = None) -> tuple[int, Any, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                        else None)
    req = urllib.request.Request(m.api + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None, resp.headers
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None, exc.headers


def test_overview_names_the_node_and_its_amqp_listener(managed: Managed) -> None:
    status, body = call(managed, "GET", "/api/overview")
    assert status == 200
    assert body["node"] == managed.node.name
    assert body["listeners"][0]["port"] == managed.node.amqp_port


def test_no_credentials_is_401_and_wrong_ones_not_authorized(managed: Managed) -> None:
    status, body, headers = call_with_headers(managed, "GET", "/api/overview", auth=None)
    assert (status, body) == (401, None)
    assert headers["WWW-Authenticate"] == 'Basic realm="RabbitMQ Management"'
    assert call(managed, "GET", "/api/overview", auth=("guest", "nope")) == (
        401, {"error": "not_authorized", "reason": "Not_Authorized"})


def test_unknown_vhost_and_queue_are_404(managed: Managed) -> None:
    assert call(managed, "GET", "/api/queues/nowhere")[0] == 404
    status, body = call(managed, "GET", "/api/queues/%2F/no-such-queue")
    assert status == 404 and body["error"] == "Object Not Found"


def test_bad_json_is_400_bad_request(managed: Managed) -> None:
    status, body = call(managed, "PUT", "/api/queues/%2F/q-bad", raw=b"{not json")
    assert (status, body) == (400, {"error": "bad_request", "reason": "not_json"})


def test_users_never_show_password_hashes(managed: Managed) -> None:
    status, body = call(managed, "GET", "/api/users")
    assert status == 200
    assert [u["name"] for u in body] == ["guest"]
    assert "password_hash" not in body[0]


def test_a_queue_is_declared_published_to_got_and_deleted(managed: Managed) -> None:
    q = "/api/queues/%2F/http-q"
    assert call(managed, "PUT", q, {"durable": True,
                                    "arguments": {"x-queue-type": "quorum"}})[0] == 201
    status, body = call(managed, "POST", "/api/exchanges/%2F/amq.default/publish",
                        {"properties": {}, "routing_key": "http-q", "payload": "hello",
                         "payload_encoding": "string"})
    assert (status, body) == (200, {"routed": True})
    status, got = call(managed, "POST", q + "/get",
                       {"count": 5, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert status == 200 and [m["payload"] for m in got] == ["hello"]
    status, row = call(managed, "GET", q)
    assert status == 200 and row["type"] == "quorum" and row["vhost"] == "/"
    assert call(managed, "DELETE", q)[0] == 204
    assert call(managed, "GET", q)[0] == 404


def test_health_checks_pass_on_a_healthy_node(managed: Managed) -> None:
    for path in ("/api/health/checks/alarms", "/api/health/checks/local-alarms",
                 "/api/aliveness-test/%2F"):
        assert call(managed, "GET", path) == (200, {"status": "ok"}), path
    assert call(managed, "GET", "/api/health/checks/node-is-quorum-critical") == (
        200, {"status": "ok", "reason": "single node cluster"})


def test_a_declare_says_whether_it_created_and_refuses_an_inequivalent_one(
        managed: Managed) -> None:
    q = "/api/queues/%2F/http-twice"
    args = {"durable": True, "arguments": {"x-queue-type": "quorum"}}
    assert call(managed, "PUT", q, args)[0] == 201
    assert call(managed, "PUT", q, args)[0] == 204
    assert call(managed, "PUT", q, {"durable": False}) == (400, {
        "error": "bad_request", "reason": "inequivalent arg 'durable' for queue "
        "'http-twice' in vhost '/': received 'false' but current is 'true'"})
    assert call(managed, "DELETE", q)[0] == 204
    assert call(managed, "DELETE", q) == (404, {"error": "Object Not Found",
                                                "reason": "Not Found"})


def test_publishing_to_a_missing_exchange_is_400_with_the_channel_error(
        managed: Managed) -> None:
    assert call(managed, "POST", "/api/exchanges/%2F/nox/publish", {
        "properties": {}, "routing_key": "k", "payload": "x",
        "payload_encoding": "string"}) == (400, {
            "error": "bad_request", "reason": "404 NOT_FOUND - no exchange 'nox' in vhost '/'"})


def test_an_unroutable_publish_is_not_routed(managed: Managed) -> None:
    assert call(managed, "POST", "/api/exchanges/%2F/amq.default/publish", {
        "properties": {}, "routing_key": "nowhere", "payload": "x",
        "payload_encoding": "string"}) == (200, {"routed": False})


def test_a_user_without_a_management_tag_is_refused(managed: Managed) -> None:
    assert ctl(managed.node.name, "add_user", "plain", "secret").returncode == 0
    assert call(managed, "GET", "/api/overview", auth=("plain", "secret")) == (
        401, {"error": "not_authorised", "reason": "Not management user"})
    assert ctl(managed.node.name, "set_user_tags", "plain", "management").returncode == 0
    assert call(managed, "GET", "/api/overview", auth=("plain", "secret"))[0] == 200
    assert call(managed, "GET", "/api/users", auth=("plain", "secret")) == (
        401, {"error": "not_authorised", "reason": "Not administrator user"})


def test_user_permission_and_policy_writes_answer_as_rabbitmq(managed: Managed) -> None:
    assert call(managed, "PUT", "/api/users/w-u", {"password": "pw"}) == (
        400, {"error": "bad_request", "reason": "tags_not_present"})
    assert call(managed, "PUT", "/api/users/w-u", {"password": "pw", "tags": ""})[0] == 201
    assert call(managed, "PUT", "/api/users/w-u", {"password": "pw2", "tags": ""})[0] == 204
    perm = "/api/permissions/%2F/w-u"
    assert call(managed, "PUT", perm, {"configure": ".*"}) == (400, {
        "error": "bad_request", "reason": "[{key_missing,write},{key_missing,read}]"})
    assert call(managed, "PUT", "/api/permissions/%2F/nobody", {
        "configure": ".*", "write": ".*", "read": ".*"}) == (
        400, {"error": "bad_request", "reason": "vhost_or_user_not_found"})
    full = {"configure": ".*", "write": ".*", "read": ".*"}
    assert call(managed, "PUT", perm, full)[0] == 201
    assert call(managed, "PUT", perm, full)[0] == 204
    assert call(managed, "GET", perm) == (200, {"user": "w-u", "vhost": "/", **full})
    assert call(managed, "DELETE", perm)[0] == 204
    assert call(managed, "DELETE", perm)[0] == 404
    assert call(managed, "DELETE", "/api/users/w-u")[0] == 204
    assert call(managed, "DELETE", "/api/users/w-u")[0] == 404
    assert call(managed, "PUT", "/api/policies/%2F/w-p", {
        "pattern": "^w", "definition": {"max-lengthx": 1}}) == (400, {
            "error": "bad_request", "reason": "Validation failed\n\n"
            "[{&lt;&lt;\"max-lengthx\"&gt;&gt;,1}] are not recognised policy settings\n"})
    assert call(managed, "PUT", "/api/policies/%2F/w-p", {
        "pattern": "^w", "definition": {"max-length": 1}})[0] == 201
    assert call(managed, "DELETE", "/api/policies/%2F/w-p")[0] == 204
    assert call(managed, "DELETE", "/api/policies/%2F/w-p")[0] == 404


def test_the_page_is_served_and_reads_the_tree_and_ra_members(managed: Managed) -> None:
    with urllib.request.urlopen(managed.api + "/", timeout=30) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/html")
        assert b"/api/warren/supervision" in resp.read()
    status, tree = call(managed, "GET", "/api/warren/supervision")
    assert status == 200 and (tree["name"], tree["restarts"]) == ("warren_sup", 0)
    assert "amqp_listener" in [c["id"] for c in tree["children"]]
    q = "/api/queues/%2F/members-q"
    assert call(managed, "PUT", q, {"durable": True,
                                    "arguments": {"x-queue-type": "quorum"}})[0] == 201
    status, members = call(managed, "GET", "/api/warren/queues/%2F/members-q/members")
    assert status == 200
    assert [(m["node"], m["raft_state"]) for m in members] == [(managed.node.name, "leader")]
    assert members[0]["commit_index"] >= 1
    assert call(managed, "DELETE", q)[0] == 204
    assert call(managed, "GET", "/api/warren/queues/%2F/members-q/members")[0] == 404


def test_many_publishes_at_once_on_a_slow_disk_all_get_their_confirms(
        managed: Managed) -> None:
    """Each publish waits for its confirm in a thread; those threads are not the ones
    the WAL syncs on (a slow disk sends every batch to a thread), so more publishes
    at once than the hub has threads still all complete."""
    q = "/api/queues/%2F/slow-disk-q"
    assert call(managed, "PUT", q, {"durable": True,
                                    "arguments": {"x-queue-type": "quorum"}})[0] == 201
    assert ctl(managed.node.name, "set_disk_delay", "20").returncode == 0
    try:
        body = {"properties": {}, "routing_key": "slow-disk-q", "payload": "m",
                "payload_encoding": "string"}
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: call(
                managed, "POST", "/api/exchanges/%2F/amq.default/publish", body), range(16)))
        assert answers == [(200, {"routed": True})] * 16
    finally:
        assert ctl(managed.node.name, "set_disk_delay", "0").returncode == 0
    assert call(managed, "DELETE", q)[0] == 204


def test_consumers_are_listed_with_the_member_that_delivers_to_them(
        managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        ch = conn.channel()
        ch.queue_declare("consumed-q", durable=True, arguments={"x-queue-type": "quorum"})
        ch.basic_qos(prefetch_count=7)
        ch.basic_consume("consumed-q", lambda *_: None, consumer_tag="ctag-1")

        def listed() -> list[Any]:  # the queue applies the checkout after consume-ok
            rows = call(managed, "GET", "/api/consumers/%2F")[1]
            return [r for r in rows if r["queue"] == {"name": "consumed-q", "vhost": "/"}]
        mine = eventually(listed)
        assert [(r["consumer_tag"], r["prefetch_count"], r["ack_required"], r["active"])
                for r in mine] == [("ctag-1", 7, True, True)]
        status, served = call(managed, "GET",
                              "/api/warren/queues/%2F/consumed-q/consumers")
        assert status == 200
        assert [(r["tag"], r["delivered_by"]) for r in served] == [
            ("ctag-1", managed.node.name)]
        ch.queue_delete("consumed-q")
    finally:
        conn.close()


def test_a_queue_put_without_a_type_is_a_classic_queue_listed_with_its_fields(
        managed: Managed) -> None:
    q = "/api/queues/%2F/plain-q"
    assert call(managed, "PUT", q, {"durable": True, "auto_delete": False,
                                    "arguments": {}})[0] == 201
    publish = {"properties": {}, "routing_key": "plain-q", "payload_encoding": "string"}
    for text in ("one", "two", "three"):
        assert call(managed, "POST", "/api/exchanges/%2F/amq.default/publish",
                    {**publish, "payload": text}) == (200, {"routed": True})
    status, row = call(managed, "GET", q)
    assert status == 200
    assert {k: row[k] for k in ("name", "vhost", "type", "durable", "auto_delete",
                                "exclusive", "exclusive_consumer_tag", "messages",
                                "messages_ready", "messages_unacknowledged",
                                "consumers", "node")} == {
        "name": "plain-q", "vhost": "/", "type": "classic", "durable": True,
        "auto_delete": False, "exclusive": False, "exclusive_consumer_tag": None,
        "messages": 3, "messages_ready": 3, "messages_unacknowledged": 0,
        "consumers": 0, "node": managed.node.name}
    assert "leader" not in row and "members" not in row
    status, got = call(managed, "POST", q + "/get",
                       {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert status == 200 and [m["payload"] for m in got] == ["one"]
    assert call(managed, "DELETE", q + "/contents")[0] == 204
    assert call(managed, "GET", q)[1]["messages"] == 0
    exported = call(managed, "GET", "/api/definitions")[1]
    assert row["arguments"].get("x-queue-type", "classic") == "classic"
    assert {"name": "plain-q", "vhost": "/", "durable": True, "auto_delete": False,
            "arguments": row["arguments"]} in exported["queues"]
    assert call(managed, "DELETE", q)[0] == 204
    assert call(managed, "GET", q)[0] == 404
    assert call(managed, "POST", "/api/definitions", {"queues": [
        {"name": "plain-q", "vhost": "/", "durable": True, "auto_delete": False,
         "arguments": {}}]})[0] == 204
    assert call(managed, "GET", q)[1]["type"] == "classic"
    assert call(managed, "DELETE", q)[0] == 204


def test_a_classic_queues_consumers_are_listed_with_its_exclusive_owner(
        managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        ch = conn.channel()
        name = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_qos(prefetch_count=5)
        ch.basic_consume(name, lambda *_: None, consumer_tag="only-me", exclusive=True)
        rows = call(managed, "GET", "/api/consumers/%2F")[1]
        mine = [r for r in rows if r["queue"] == {"name": name, "vhost": "/"}]
        assert [(r["consumer_tag"], r["prefetch_count"], r["ack_required"], r["active"],
                 r["exclusive"]) for r in mine] == [("only-me", 5, True, True, True)]
        row = call(managed, "GET", "/api/queues/%2F/" + name)[1]
        assert (row["type"], row["exclusive"], row["exclusive_consumer_tag"],
                row["consumers"]) == ("classic", True, "only-me", 1)
        connection = call(managed, "GET", "/api/connections")[1][0]["name"]
        assert row["owner_pid_details"]["name"] == connection
        channel = mine[0]["channel_details"]["name"]
        channels = call(managed, "GET", "/api/channels")[1]
        assert [c["consumer_count"] for c in channels if c["name"] == channel] == [1]
    finally:
        conn.close()


def test_an_exchange_and_its_binding_are_declared_listed_used_and_removed(
        managed: Managed) -> None:
    x = "/api/exchanges/%2F/http-x"
    assert call(managed, "PUT", x, {"type": "topic", "durable": True})[0] == 201
    status, row = call(managed, "GET", x)
    assert status == 200
    assert {k: row[k] for k in ("name", "vhost", "type", "durable", "auto_delete",
                                "internal")} == {
        "name": "http-x", "vhost": "/", "type": "topic", "durable": True,
        "auto_delete": False, "internal": False}
    assert call(managed, "PUT", "/api/queues/%2F/http-bound", {"durable": True})[0] == 201
    status, _body, headers = call_with_headers(
        managed, "POST", "/api/bindings/%2F/e/http-x/q/http-bound", {"routing_key": "a.#"})
    assert (status, headers["Location"]) == (201, "http-bound/a.%23")
    rows = call(managed, "GET", "/api/bindings/%2F")[1]
    assert {"source": "http-x", "vhost": "/", "destination": "http-bound",
            "destination_type": "queue", "routing_key": "a.#", "arguments": {},
            "properties_key": "a.#"} in rows
    assert call(managed, "POST", x + "/publish", {
        "properties": {}, "routing_key": "a.b", "payload": "via-x",
        "payload_encoding": "string"}) == (200, {"routed": True})
    assert call(managed, "DELETE", "/api/bindings/%2F/e/http-x/q/http-bound/a.%23")[0] == 204
    assert call(managed, "POST", x + "/publish", {
        "properties": {}, "routing_key": "a.b", "payload": "lost",
        "payload_encoding": "string"}) == (200, {"routed": False})
    got = call(managed, "POST", "/api/queues/%2F/http-bound/get",
               {"count": 5, "ackmode": "ack_requeue_false", "encoding": "auto"})[1]
    assert [m["payload"] for m in got] == ["via-x"]
    assert call(managed, "DELETE", x)[0] == 204
    assert call(managed, "GET", x)[0] == 404
    assert call(managed, "DELETE", "/api/queues/%2F/http-bound")[0] == 204


def test_nodes_vhosts_connections_and_channels_are_listed(managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        conn.channel()
        nodes = call(managed, "GET", "/api/nodes")[1]
        assert [(n["name"], n["running"]) for n in nodes] == [(managed.node.name, True)]
        vhosts = call(managed, "GET", "/api/vhosts")[1]
        assert "/" in [v["name"] for v in vhosts]
        connections = call(managed, "GET", "/api/connections")[1]
        assert [(c["user"], c["vhost"], c["protocol"]) for c in connections] == [
            ("guest", "/", "AMQP 0-9-1")]
        channels = call(managed, "GET", "/api/channels")[1]
        assert [(c["number"], c["connection_details"]["name"]) for c in channels] == [
            (1, connections[0]["name"])]
    finally:
        conn.close()


def test_a_memory_alarm_fails_both_alarm_checks_until_it_clears(managed: Managed) -> None:
    node = managed.node.name
    assert ctl(node, "set_vm_memory_high_watermark", "0").returncode == 0
    try:
        failed = eventually(lambda: call(managed, "GET", "/api/health/checks/alarms")[0] == 503)
        assert failed
        status, body = call(managed, "GET", "/api/health/checks/alarms")
        assert (status, body["status"], body["reason"]) == (
            503, "failed", "There are alarms in effect in the cluster")
        assert {"type": "resource_limit", "resource": "memory", "node": node} in body["alarms"]
        status, body = call(managed, "GET", "/api/health/checks/local-alarms")
        assert (status, body["reason"]) == (503, "There are alarms in effect in the node")
    finally:
        assert ctl(node, "set_vm_memory_high_watermark", "0.4").returncode == 0
    assert eventually(lambda: call(managed, "GET", "/api/health/checks/alarms") == (
        200, {"status": "ok"}))


def test_no_answer_carries_the_cookie_or_a_non_admin_sees_a_hash(managed: Managed) -> None:
    for path in ("/api/overview", "/api/nodes", "/api/nodes/" + managed.node.name,
                 "/api/users", "/api/definitions", "/api/vhosts", "/api/connections"):
        status, body = call(managed, "GET", path)
        assert status == 200 and COOKIE not in json.dumps(body), path
    assert ctl(managed.node.name, "add_user", "watcher", "pw").returncode == 0
    assert ctl(managed.node.name, "set_user_tags", "watcher", "monitoring").returncode == 0
    assert call(managed, "GET", "/api/definitions", auth=("watcher", "pw")) == (
        401, {"error": "not_authorised", "reason": "Not administrator user"})
    assert ctl(managed.node.name, "delete_user", "watcher").returncode == 0
