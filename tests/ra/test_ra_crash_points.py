"""A node killed (SIGKILL) at each point of a WAL rollover, a segment flush and a
snapshot write loses no confirmed command.

One node process runs a one-member cluster, so every confirmed command was
written and synced there and nowhere else: whatever the restarted node brings
back comes from its own files. The node is started with
``WARREN_RA_CRASH_AT=<point>`` (`ra.crash_points`) and kills itself the first
time it reaches that point while the client pipelines commands; it is then
started again without it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from ra import api, crash_points
from tests.ra.ra_multiproc_support import (
    LedgerMachine,
    ProcCluster,
    Publisher,
    check_ledger,
    ledger,
    overview,
    proc_cluster,
    start_cluster,
    wait_until,
)

#: more than enough commands to roll the small WAL files over, flush them and snapshot
MAX_COMMANDS = 3000


@pytest.fixture(params=crash_points.POINTS)
def armed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcCluster]:
    with proc_cluster(tmp_path, size=1, env={crash_points.ENV: request.param}) as cluster:
        yield cluster


def _publish_until_it_dies(pub: Publisher, procs: ProcCluster) -> None:
    node = procs.nodes[0]
    seq = 0
    while node.alive and seq < MAX_COMMANDS:
        for _ in range(10):
            pub.send(seq)
            seq += 1
        while (msg := actors.receive(20)) is not actors.TIMEOUT:
            pub.handle(msg)


def test_a_node_killed_at_any_point_of_a_rollover_flush_or_snapshot_keeps_every_confirmed_command(
        armed: ProcCluster) -> None:
    procs = armed
    node = procs.nodes[0]
    sid = ("s1", node.name)
    start_cluster([sid], LedgerMachine(snapshot_every=50))
    pub = Publisher([sid], sid)
    _publish_until_it_dies(pub, procs)
    assert node.proc is not None
    assert node.proc.wait(10) == -signal.SIGKILL, "the node never reached its crash point"
    wait_until(lambda: node.name not in actors.nodes(), what=f"{node.name} to be down")
    confirmed = dict(pub.applied)
    assert confirmed, "nothing was confirmed before the crash"

    procs.env = {}
    procs.boot(node)
    assert api.restart_server("default", sid) == "ok"
    newest = max(reply[1] for reply in confirmed.values())
    wait_until(lambda: overview(sid)["last_applied"] >= newest,
               what="the restarted member to apply what it had confirmed")
    state = ledger(sid)[1]
    pub.applied = confirmed
    check_ledger(state, pub)
    # a confirmed command keeps the log index it was confirmed at
    at = {seq: idx for idx, seq in state}
    assert all(reply == ("put", at[seq]) for seq, reply in confirmed.items())
