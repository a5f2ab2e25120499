"""Which Ra member sends a quorum queue's deliveries to each of its consumers.

Every member applies every checkout, but only one sends a consumer its messages:
the voter on the consumer's node, or the leader when no voter lives there (Ra's
local delivery). The consumers are read from the leader's machine state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import actors
from broker import ctl_ops
from broker.running import broker_of
from ra import api

__all__ = ["consumers", "delivering_member"]

QUERY_TIMEOUT = 2000


def delivering_member(consumer_node: str, voters: Iterable[str], leader: str) -> str:
    """The node whose member sends to a consumer whose channel is on `consumer_node`."""
    return consumer_node if consumer_node in set(voters) else leader


def _consumer_rows(state: Any) -> list[dict[str, Any]]:
    """The machine's consumers as plain rows (what travels back from the query)."""
    rows = []
    for consumer in state.consumers.values():
        cfg = consumer.cfg
        mode = cfg.credit_mode
        prefetch = mode[1] if isinstance(mode, tuple) and len(mode) == 2 else 0
        rows.append({"tag": cfg.tag, "pid": cfg.pid, "status": consumer.status,
                     "checked_out": len(consumer.checked_out), "prefetch": prefetch,
                     "ack": cfg.lifetime == "auto" or bool(cfg.meta.get("ack", True)),
                     "priority": cfg.priority})
    return rows


def consumers(vhost: str, name: str) -> list[dict[str, Any]]:
    """The queue's consumers with the member that delivers to each (in a process of
    the node); none when the queue has no leader to ask."""
    record = broker_of().registry.lookup(vhost, name)
    if record is None:
        return []
    found = api.members(list(record.servers), QUERY_TIMEOUT)
    if found[0] != "ok":
        return []
    leader = found[2]
    result = api.local_query(leader, _consumer_rows, QUERY_TIMEOUT)
    if result[0] != "ok":
        return []
    members = ctl_ops.quorum_status(vhost, name)
    voters = [m["node"] for m in members
              if m.get("raft_state") not in (None, "noproc")
              and m.get("membership") in (None, "voter")]
    rows = []
    for c in result[1][1]:
        node = c["pid"].node if isinstance(c["pid"], actors.Pid) else str(c["pid"])
        rows.append({**c, "pid": str(c["pid"]), "consumer_node": node,
                     "delivered_by": delivering_member(node, voters, leader[1])})
    return rows
