"""`queue-master-locator` as each release takes it, on a running node.

4.3 denies the deprecated `queue_master_locator` feature by default: a policy
carrying the key is refused by `warren ctl set_policy` and by the HTTP API's
`PUT /api/policies` with `rabbit_classic_queue`'s text, and a classic declare
carrying `x-queue-master-locator` closes the connection with 541. 4.2 permits the
feature; so does a 4.3 node whose config permits it
(`amqp.deprecated_features_permit`), for the policy and the argument alike.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pika.exceptions as pex
import pytest

from tests.broker.broker_support import BrokerProc, connect, ctl, running_cluster

DENIED = "use of deprecated queue-master-locator argument is not permitted"
POLICY = {"pattern": "^cq", "definition": {"queue-master-locator": "client-local"},
          "apply-to": "queues"}


def _put_policy(node: BrokerProc) -> tuple[int, Any]:
    port = json.loads((node.data_dir / "ready").read_text())["management_port"]
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/policies/%2F/loc",
                                 data=json.dumps(POLICY).encode(), method="PUT",
                                 headers={"content-type": "application/json"})
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _declare_with_locator(node: BrokerProc) -> Any:
    conn = connect(node)
    try:
        conn.channel().queue_declare("cq", durable=True, arguments={
            "x-queue-type": "classic", "x-queue-master-locator": "client-local"})
    except pex.ConnectionClosedByBroker as e:
        return e.reply_code
    conn.close()
    return "ok"


def test_4_3_refuses_a_queue_master_locator_policy_by_default(tmp_path: Path) -> None:
    with running_cluster(tmp_path, count=1, extra=["--rabbitmq-version", "4.3"]) as nodes:
        node = nodes[0]
        out = ctl(node.name, "set_policy", "loc", "^cq",
                  json.dumps(POLICY["definition"]), "--apply-to", "queues")
        assert out.returncode == 65
        assert DENIED in out.stderr
        assert _put_policy(node) == (400, {"error": "bad_request",
                                           "reason": f"Validation failed\n\n{DENIED}\n"})
        assert _declare_with_locator(node) == 541
        assert ctl(node.name, "--formatter", "json", "list_policies").stdout.strip() == "[]"


@pytest.mark.parametrize("extra", [["--rabbitmq-version", "4.2"], ["--rabbitmq-version", "4.3"]])
def test_a_permitted_queue_master_locator_is_taken(tmp_path: Path, extra: list[str]) -> None:
    config = tmp_path / "node.json"
    # 4.2 permits the feature by default; the 4.3 node is permitted it by its config
    config.write_text(json.dumps({"amqp": {"deprecated_features_permit": {
        "queue_master_locator": True}}} if extra[1] == "4.3" else {}))
    with running_cluster(tmp_path, count=1, extra=[*extra, "--config", str(config)]) as nodes:
        node = nodes[0]
        out = ctl(node.name, "set_policy", "loc", "^cq",
                  json.dumps(POLICY["definition"]), "--apply-to", "queues")
        assert out.returncode == 0, out.stderr
        assert _put_policy(node)[0] == 204  # the same policy again: updated
        assert _declare_with_locator(node) == "ok"
