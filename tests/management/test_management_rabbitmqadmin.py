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


def test_users_permissions_vhosts_and_policies(managed: Managed) -> None:
    admin(managed, "declare", "vhost", "name=admin-vh")
    admin(managed, "declare", "user", "name=admin-u", "password=pw", "tags=management")
    admin(managed, "declare", "permission", "vhost=admin-vh", "user=admin-u",
          "configure=.*", "write=.*", "read=.*")
    admin(managed, "declare", "policy", "name=admin-p", "pattern=^admin",
          'definition={"max-length": 5}', "apply-to=queues")
    users = json.loads(admin(managed, "-f", "raw_json", "list", "users"))
    assert {"name": "admin-u", "tags": ["management"], "limits": {}} in users
    perms = json.loads(admin(managed, "-f", "raw_json", "list", "permissions"))
    assert {"user": "admin-u", "vhost": "admin-vh", "configure": ".*", "write": ".*",
            "read": ".*"} in perms
    policies = json.loads(admin(managed, "-f", "raw_json", "list", "policies"))
    assert [p["definition"] for p in policies if p["name"] == "admin-p"] == [{"max-length": 5}]
    # the new user logs in with its password and sees only its vhost's queues
    rows = json.loads(subprocess.run(
        [ADMIN, "-H", "127.0.0.1", "-P", str(managed.management_port), "-u", "admin-u",
         "-p", "pw", "-f", "raw_json", "list", "vhosts"],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    assert [v["name"] for v in rows] == ["admin-vh"]
    admin(managed, "delete", "policy", "name=admin-p")
    admin(managed, "delete", "permission", "vhost=admin-vh", "user=admin-u")
    admin(managed, "delete", "user", "name=admin-u")
    admin(managed, "delete", "vhost", "name=admin-vh")
    names = [v["name"] for v in json.loads(admin(managed, "-f", "raw_json", "list", "vhosts"))]
    assert names == ["/"]


def test_an_import_restores_users_with_their_passwords_and_policies(
        managed: Managed, tmp_path: Path) -> None:
    admin(managed, "declare", "user", "name=defs-u", "password=secret", "tags=monitoring")
    admin(managed, "declare", "policy", "name=defs-p", "pattern=^defs",
          'definition={"max-length": 7}')
    exported = tmp_path / "defs.json"
    admin(managed, "export", str(exported))
    admin(managed, "delete", "user", "name=defs-u")
    admin(managed, "delete", "policy", "name=defs-p")
    admin(managed, "import", str(exported))
    back = subprocess.run(
        [ADMIN, "-H", "127.0.0.1", "-P", str(managed.management_port), "-u", "defs-u",
         "-p", "secret", "-f", "raw_json", "list", "nodes"],
        capture_output=True, text=True, timeout=60)
    assert back.returncode == 0, back.stderr  # a monitoring user, its password kept
    policies = json.loads(admin(managed, "-f", "raw_json", "list", "policies"))
    assert [p["definition"] for p in policies if p["name"] == "defs-p"] == [{"max-length": 7}]
    admin(managed, "delete", "user", "name=defs-u")
    admin(managed, "delete", "policy", "name=defs-p")
