"""Debian's `rabbitmqadmin` (RabbitMQ's own CLI of the HTTP API) drives a warren node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.management.conftest import Managed

ADMIN = shutil.which("rabbitmqadmin") or "/usr/bin/rabbitmqadmin"


def admin(m: Managed, *args: str) -> str:
    done = subprocess.run([ADMIN, "-H", "127.0.0.1", "-P", str(m.management_port),
                           "-u", "guest", "-p", "guest", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_declare_list_publish_get_delete_a_queue(managed: Managed) -> None:
    admin(managed, "declare", "queue", "name=admin-q", "durable=true",
          'arguments={"x-queue-type": "quorum"}')
    rows = json.loads(admin(managed, "-f", "raw_json", "list", "queues"))
    assert "admin-q" in [r["name"] for r in rows]
    assert "Message published" in admin(managed, "publish", "routing_key=admin-q",
                                        "payload=from-admin")
    got = json.loads(admin(managed, "-f", "raw_json", "get", "queue=admin-q",
                           "ackmode=ack_requeue_false"))
    assert [m["payload"] for m in got] == ["from-admin"]
    admin(managed, "delete", "queue", "name=admin-q")
    rows = json.loads(admin(managed, "-f", "raw_json", "list", "queues"))
    assert "admin-q" not in [r["name"] for r in rows]


def test_definitions_export_and_import(managed: Managed, tmp_path: Path) -> None:
    admin(managed, "declare", "queue", "name=defs-q", "durable=true",
          'arguments={"x-queue-type": "quorum"}')
    exported = tmp_path / "defs.json"
    admin(managed, "export", str(exported))
    defs = json.loads(exported.read_text())
    assert "defs-q" in [q["name"] for q in defs["queues"]]
    admin(managed, "delete", "queue", "name=defs-q")
    admin(managed, "import", str(exported))
    rows = json.loads(admin(managed, "-f", "raw_json", "list", "queues"))
    assert "defs-q" in [r["name"] for r in rows]
    admin(managed, "delete", "queue", "name=defs-q")
