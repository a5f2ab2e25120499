"""What a node keeps on disk of its users' passwords: never the password.

Real node processes with data dirs: a password set with `warren ctl` is found in
no file (WAL, segments, snapshots, metadata, the node's log) before or after a
restart; a store holding a cleartext user, as an older warren left it, still
logs that user in, and after the first boot of this warren holds its password in
no file, the snapshot then written included; every file the node made is 0600
and every directory 0700.
"""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pika
import pika.exceptions as pex

from tests.broker.broker_support import (
    ROOT,
    BrokerProc,
    connect,
    ctl,
    env,
    eventually,
    plan,
    start_cluster,
    stop_all,
)

SECRET = "Zq8-stored-nowhere-in-clear"
NEW_SECRET = "Kp3-changed-nowhere-in-clear"


def ok(node: str, *args: str) -> None:
    out = ctl(node, *args)
    assert out.returncode == 0, out.stderr


def files_holding(root: Path, text: str) -> list[str]:
    """Every file under `root` (data dir and node logs) whose bytes contain `text`."""
    needle = text.encode()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def logs_in(b: BrokerProc, user: str, password: str) -> bool:
    try:
        connect(b, user, password).close()
    except (pex.ProbableAuthenticationError, pex.ProbableAccessDeniedError):
        return False
    return True


def restart(nodes: list[BrokerProc]) -> None:
    """Stop the nodes and start them on the same dirs (a restarted node is ready
    before its copy of the metadata has caught up: logins are polled after it)."""
    stop_all(nodes)
    start_cluster(nodes)


def eventually_logs_in(b: BrokerProc, user: str, password: str) -> bool:
    return bool(eventually(lambda: logs_in(b, user, password)))


def test_a_password_set_with_warren_ctl_is_in_no_file_before_or_after_a_restart(
        tmp_path: Path) -> None:
    nodes = plan(1, tmp_path)
    (n1,) = nodes
    try:
        start_cluster(nodes)
        ok(n1.name, "add_user", "alice", SECRET)
        ok(n1.name, "set_permissions", "alice", ".*", ".*", ".*")
        assert logs_in(n1, "alice", SECRET) and not logs_in(n1, "alice", "wrong")
        assert files_holding(tmp_path, SECRET) == []
        restart(nodes)
        assert eventually_logs_in(n1, "alice", SECRET)
        ok(n1.name, "change_password", "alice", NEW_SECRET)
        assert logs_in(n1, "alice", NEW_SECRET) and not logs_in(n1, "alice", SECRET)
        restart(nodes)
        assert eventually_logs_in(n1, "alice", NEW_SECRET)
        assert files_holding(tmp_path, SECRET) == []
        assert files_holding(tmp_path, NEW_SECRET) == []
        ok(n1.name, "clear_password", "alice")
        assert not logs_in(n1, "alice", NEW_SECRET)
    finally:
        stop_all(nodes)


def test_a_cleartext_user_left_by_an_older_warren_logs_in_and_is_hashed_at_boot(
        tmp_path: Path) -> None:
    nodes = plan(1, tmp_path)
    (n1,) = nodes
    try:
        start_cluster(nodes)
        injected = subprocess.run(
            [sys.executable, "-m", "tests.broker.legacy_store", n1.name, "olduser", SECRET],
            cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
        assert injected.returncode == 0, injected.stdout + injected.stderr
        assert files_holding(n1.data_dir, SECRET) != []  # in the log, as it was stored
        assert logs_in(n1, "olduser", SECRET)

        restart(nodes)  # the first boot of this warren on that store
        assert eventually(lambda: files_holding(tmp_path, SECRET) == [], timeout=30), \
            files_holding(tmp_path, SECRET)
        assert eventually_logs_in(n1, "olduser", SECRET)
        assert not logs_in(n1, "olduser", "wrong")
        assert list(n1.data_dir.rglob("snapshot.dat")), "the conversion's snapshot"
        restart(nodes)
        assert eventually_logs_in(n1, "olduser", SECRET)
        assert files_holding(tmp_path, SECRET) == []
    finally:
        stop_all(nodes)


def test_every_file_of_a_node_is_0600_and_every_directory_0700(tmp_path: Path) -> None:
    nodes = plan(1, tmp_path)
    (n1,) = nodes
    try:
        start_cluster(nodes)
        conn = connect(n1)
        ch = conn.channel()
        ch.queue_declare("modes", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        ch.basic_publish("", "modes", b"m", pika.BasicProperties(delivery_mode=2))
        conn.close()
        restart(nodes)  # the WAL is flushed into segment files
    finally:
        stop_all(nodes)
    paths = [n1.data_dir, *n1.data_dir.rglob("*")]
    assert any(p.suffix == ".segment" for p in paths) and any(p.suffix == ".wal" for p in paths)
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths}
    assert {k: v for k, v in modes.items()
            if v != ("0o700" if (tmp_path / k).is_dir() else "0o600")} == {}
