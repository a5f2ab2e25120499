"""Recovery checkpoints: the state a server saves as it stops in order, so its next
start need not replay the log (``ra_server:maybe_write_recovery_checkpoint`` and
``maybe_recover_from_recovery_checkpoint``).

A restarted server rebuilds its machine state from its newest snapshot or
checkpoint and then applies every committed entry after it again. With a large
``min_snapshot_interval`` (a quorum queue's state is only snapshotted when its
backlog shrinks) that replay can be long. ``min_recovery_checkpoint_interval``
(a server config key, else the Ra system's; 0, Ra's default, turns it off: a
node sets the system's from its RabbitMQ release) makes an orderly stop write
the applied state once at least that many entries were applied past the newest
snapshot, checkpoint or recovery checkpoint. It is written without fsync: a
crash never writes one, and one lost to a power cut only means a replay.

At the next start it is used only when it lies above the snapshot the server
recovered from and at or below the commit index known from the persisted
``last_applied`` (Ra compares with the recovered ``last_applied``, which at
that point is the snapshot index). It is never a snapshot: the log is not
truncated below it, and a snapshot at or above it deletes it.

Pure: the log reads and writes the files; nothing here does I/O itself.
"""

from __future__ import annotations

from typing import Any

from ra import machine as ra_machine
from ra.log_base import Snapshot
from ra.release_cursor import index_machine_version
from ra.state import ServerState, dehydrate, make_cluster

#: server config key (and Ra system key) and Ra's default (off)
CONFIG_KEY = "min_recovery_checkpoint_interval"
DEFAULT_INTERVAL = 0


def interval(server_config: dict[str, Any], system_config: dict[str, Any]) -> int:
    """A member's interval: its own config's, else its Ra system's, else Ra's default.
    The system's stands for the default a RabbitMQ release gives every quorum queue
    (`quorum_min_recovery_checkpoint_interval`: 100000 in 4.3, none before)."""
    return int(server_config.get(CONFIG_KEY, system_config.get(CONFIG_KEY, DEFAULT_INTERVAL)))


def to_write(s: ServerState, interval: int) -> Snapshot | None:
    """What an orderly stop writes, or None: off, too close to a saved state, or
    the applied index has no term in the log any more."""
    if interval <= 0:
        return None
    idx = s.last_applied
    if idx - s.log.highest_snapshot_index() < interval:
        return None
    term = s.log.fetch_term(idx)
    if term is None:
        return None
    # the version in force at the index, as a snapshot records it: the newest the
    # code knows may not be in effect yet (a cluster part-way through an upgrade)
    meta: dict[str, Any] = {"index": idx, "term": term, "cluster": dehydrate(s.cluster),
                            "machine_version": index_machine_version(idx, s)}
    return meta, s.machine_state


def recover(s: ServerState) -> bool:
    """Jump a recovering server to its recovery checkpoint if it may; True if it did.

    The caller re-initialises the aux state: it is never saved, and the
    machine module may have changed with the checkpoint's version.
    """
    rc = s.log.recovery_checkpoint_index_term()
    if rc is None or not s.last_applied < rc[0] <= s.commit_index:
        return False
    found = s.log.read_recovery_checkpoint()
    if found is None:
        return False
    meta, mac_state = found
    rc_idx, rc_term = int(meta["index"]), int(meta["term"])
    cfg = s.cfg
    version = int(meta["machine_version"])
    if version > cfg.effective_machine_version:
        cfg.effective_machine_version = version
        cfg.machine_versions = [(rc_idx, version), *cfg.machine_versions]
        cfg.effective_machine_module = ra_machine.which_module(cfg.machine, version)
    s.machine_state = mac_state
    s.last_applied = rc_idx
    if meta.get("cluster"):
        s.cluster = make_cluster(cfg.id, meta["cluster"])
        s.cluster_index_term = (rc_idx, rc_term)
    return True
