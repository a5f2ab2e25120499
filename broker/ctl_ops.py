"""Operator commands as they run *on* the node (the server side of `warren ctl`).

`warren ctl` executes these functions on the target node, in a process there
(`ra.system.rpc`, Erlang's `rpc:call`, which is how rabbitmqctl reaches
`rabbit_*` modules). Each returns plain data (rows of dicts) or raises
`CtlError` with the message the CLI prints; nothing here prints.
"""

from __future__ import annotations

import logging
from typing import Any

import actors
from actors import gen_server
from broker import policy as pol
from broker.alarms import ALARM_SERVER
from broker.ctl_common import EX_UNAVAILABLE, INFO_TIMEOUT, CtlError
from broker.ctl_queues import classic_queue_rows, select_columns
from broker.formation import ping
from broker.metadata import CLUSTER_NAME, classic_queues, effective_policy
from broker.node import DLX_SUP, RA_SYSTEM
from broker.policy_keys import MasterLocator
from broker.queue_code import code_version
from broker.queue_config import machine_config
from broker.running import broker_of
from channel.access.auth import User
from channel.access.permissions import Permission
from channel.access.topic_permissions import TopicPermission, validate_pattern
from channel.limits.limits import USER_LIMITS, VHOST_LIMITS, validate_limits
from channel.queue_types.queue_registry import QueueRecord
from fifo import ra_glue
from ra import api, directory
from ra import system as ra_system
from ra.disk_store import DiskStore
from releases import WHEN_PERMITTED
from supervision import supervisor

__all__ = ["EX_UNAVAILABLE", "INFO_TIMEOUT", "CtlError"]

#: the WAL answers calls after its current batch, which a disk delay makes slow
WAL_CALL_TIMEOUT = 25_000

log = logging.getLogger("warren.broker")


def _record(vhost: str, name: str) -> QueueRecord:
    record = broker_of().registry.lookup(vhost, name)
    if record is None:
        raise CtlError(f"queue '{name}' in vhost '{vhost}' does not exist")
    return record


def _ask(pid: Any, message_tag: str = "info") -> dict[str, Any] | None:
    tag = actors.make_ref()
    actors.send(pid, (message_tag, actors.self(), tag))
    msg = actors.receive(INFO_TIMEOUT, match=lambda m: isinstance(m, tuple) and m[0] == tag)
    return None if msg is actors.TIMEOUT else msg[1]


# ------------------------------------------------------------------ cluster


def cluster_status() -> dict[str, Any]:
    broker = broker_of()
    node = actors.get_node()
    nodes = broker.config.all_nodes
    running = [n for n in nodes if n == node.name or ping(n, 1000) == "pong"]
    members = api.members((CLUSTER_NAME, node.name), INFO_TIMEOUT)
    alarms = _alarm_maps(_call(ALARM_SERVER, "get_alarms"))
    return {
        "node": node.name,
        "rabbitmq_version": broker.release.server.version,
        "disk_nodes": nodes,
        "running_nodes": running,
        "down_nodes": [n for n in nodes if n not in running],
        "metadata_members": sorted(m[1] for m in members[1]) if members[0] == "ok" else [],
        "metadata_leader": members[2][1] if members[0] == "ok" else None,
        "alarms": alarms,
        "formation": broker.formation,
    }


def _alarm_maps(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    """(resource, node) pairs as rabbitmqctl's JSON shows alarms."""
    return [{"type": "resource_limit", "resource": r, "node": n} for r, n in pairs]


def alarms() -> list[dict[str, str]]:
    """`rabbitmq-diagnostics alarms`: every resource alarm in effect, by node, as
    the target node knows them."""
    return _alarm_maps(_call(ALARM_SERVER, "get_alarms"))


def _call(name: str, request: Any, timeout: int = INFO_TIMEOUT) -> Any:
    return gen_server.call(name, request, timeout)


# ------------------------------------------------------------------- queues


def _overview(record: QueueRecord) -> tuple[dict[str, Any], Any]:
    """The queue machine's overview as its leader reports it (empty when no member
    answers), and the leader's node."""
    found = api.members(list(record.servers), INFO_TIMEOUT)
    if found[0] != "ok":
        return {}, None
    ov = api.member_overview(found[2], INFO_TIMEOUT)
    machine = ov.get("machine", {}) if isinstance(ov, dict) else {}
    return machine, found[2][1]


def _total(machine: dict[str, Any], *keys: str) -> int | None:
    """The sum of overview counters, None when the leader did not answer."""
    return sum(machine[k] for k in keys) if all(k in machine for k in keys) else None


def list_queues(vhost: str = "/", columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One row per queue, or only the `columns` named, as rabbitmqctl's info keys
    (`broker.ctl_queues`). `messages_dlx` / `message_bytes_dlx` are RabbitMQ's quorum
    queue statistics of the same names: the dead letters an at-least-once queue still
    holds (waiting for, or handed to, its dead-letter worker) and their body bytes."""
    broker = broker_of()
    rows = []
    for r in sorted(broker.registry.list(vhost), key=lambda r: r.name):
        machine, leader = _overview(r)
        p = effective_policy(broker.view.state, r.vhost, r.name)
        ready = _total(machine, "num_ready_messages")
        rows.append({"name": r.name, "type": "quorum", "durable": r.durable,
                     "auto_delete": False, "exclusive": "",  # rabbitmqctl's blank
                     "messages_ready": ready,
                     "messages_unacknowledged": _total(machine, "num_checked_out"),
                     "messages": machine.get("num_messages"),
                     "consumers": machine.get("num_consumers"),
                     "leader": leader or (r.leader or (None, None))[1],
                     "members": [n for _s, n in r.servers], "policy": p.name if p else None,
                     "messages_dlx": _total(machine, "num_discarded",
                                            "num_discard_checked_out"),
                     "message_bytes_dlx": _total(machine, "discard_message_bytes",
                                                 "discard_checkout_message_bytes")})
    rows += classic_queue_rows(vhost)
    local = getattr(broker.backend, "queues", None)
    if isinstance(local, dict):  # the node-local test backend
        for (vh, name), q in sorted(local.items()):
            if vh == vhost:
                rows.append({"name": name, "type": "classic", "messages": len(q.ready),
                             "consumers": len(q.consumers), "leader": actors.node(),
                             "members": [actors.node()], "policy": None,
                             "messages_dlx": None, "message_bytes_dlx": None})
    return select_columns(rows, columns)


def quorum_status(vhost: str, name: str) -> list[dict[str, Any]]:
    record = _record(vhost, name)
    rows: list[dict[str, Any]] = []
    for sid in record.servers:
        ov = api.member_overview(sid, INFO_TIMEOUT)
        if not isinstance(ov, dict):
            rows.append({"node": sid[1], "raft_state": "noproc"})
            continue
        rows.append({"node": sid[1], "raft_state": ov["raft_state"],
                     "membership": ov.get("membership"), "last_log_index": ov["last_index"],
                     "last_written": ov["last_written_index"],
                     "last_applied": ov["last_applied"], "commit_index": ov["commit_index"],
                     "snapshot_index": ov["snapshot_index"], "term": ov["current_term"],
                     "machine_version": ov["effective_machine_version"],
                     # warren's own: the member's code, and each version switch it
                     # applied since its last snapshot, newest first ([index, version])
                     "code_machine_version": ov["machine_version"],
                     "machine_versions": [list(v) for v in ov["machine_versions"]]})
    return rows


def _joining_versions(record: QueueRecord, node: str) -> tuple[int, int]:
    """The machine version of `node`'s code and the version a new member of the queue
    there starts at.

    `rabbit_quorum_queue:add_member` asks the new member's node for its
    `rabbit_fifo:version()`, not the caller's, so on a cluster halfway through a
    rolling upgrade a member added from a 4.2 node onto a 4.3 node runs 4.3's code.
    Its effective version then comes from the queue's log, as every member's does: it
    starts at the version in force where the leader's log begins (its oldest
    `machine_versions` entry, a snapshot's or the queue's first), never above its
    own code's, and moves on at each `{machine_version, Old, New}` entry it applies,
    so it applies the queue's commands at the cluster's version and is upgraded
    with the other members.
    """
    code = ra_system.rpc(node, code_version, timeout=INFO_TIMEOUT)
    if not isinstance(code, int) or isinstance(code, bool):
        raise CtlError(f"cannot reach {node}: {code!r}", EX_UNAVAILABLE)
    members = api.members(list(record.servers), INFO_TIMEOUT)
    leader = members[2] if members[0] == "ok" else record.leader
    overview = api.member_overview(leader, INFO_TIMEOUT) if leader is not None else None
    if not isinstance(overview, dict) or not overview.get("machine_versions"):
        return code, code
    log_start = int(overview["machine_versions"][-1][1])
    return code, min(code, log_start)


def add_member(vhost: str, name: str, node: str) -> str:
    broker = broker_of()
    record = _record(vhost, name)
    if node not in broker.config.all_nodes:
        raise CtlError(f"node {node} is not a cluster member")
    new = (record.ra_name, node)
    if new in record.servers:
        raise CtlError(f"{node} is already a member of queue '{name}'")
    config = machine_config(record, int(actors.get_node().clock.system_time_ms()),
                            broker.release)
    code, initial = _joining_versions(record, node)
    # the new member's own node runs it on its release's code whatever this node's is
    # (the Ra system's `machine_code`): the version here only names the code it asks for
    machine = ra_glue.QueueMachine(config, code)
    server = {"id": new, "uid": api.new_uid(record.ra_name), "cluster_name": record.ra_name,
              "initial_members": [*record.servers, new], "machine": machine,
              "initial_machine_version": initial}
    started = api.start_server(RA_SYSTEM, server)
    if started != "ok":
        raise CtlError(f"cannot start a member of '{name}' on {node}: {started!r}", 70)
    added = api.add_member(list(record.servers), new, 5000)
    if added[0] != "ok":
        api.force_delete_server(RA_SYSTEM, new)
        raise CtlError(f"cannot add {node} to '{name}': {added!r}", 70)
    broker.metadata.command(("update_members", vhost, name, [*record.servers, new]))
    return "ok"


def delete_member(vhost: str, name: str, node: str) -> str:
    broker = broker_of()
    record = _record(vhost, name)
    sid = (record.ra_name, node)
    if sid not in record.servers:
        raise CtlError(f"{node} is not a member of queue '{name}'")
    if len(record.servers) == 1:
        raise CtlError(f"cannot remove the last member of queue '{name}'")
    removed = api.remove_member(list(record.servers), sid, 5000)
    if removed[0] != "ok" and removed != ("error", "not_member"):
        raise CtlError(f"cannot remove {node} from '{name}': {removed!r}", 70)
    api.force_delete_server(RA_SYSTEM, sid)
    rest = [s for s in record.servers if s != sid]
    broker.metadata.command(("update_members", vhost, name, rest))
    if record.leader == sid:
        broker.metadata.command(("update_leader", vhost, name, rest[0]))
    return "ok"


def grow(node: str, vhost_pattern: str = ".*", queue_pattern: str = ".*") -> list[dict[str, Any]]:
    """`rabbitmq-queues grow`: a member on `node` for every quorum queue lacking one."""
    import re

    rows = []
    for r in broker_of().registry.list():
        if node in (n for _s, n in r.servers) or not (
                re.search(vhost_pattern, r.vhost) and re.search(queue_pattern, r.name)):
            continue
        try:
            add_member(r.vhost, r.name, node)
            rows.append({"vhost": r.vhost, "name": r.name, "size": len(r.servers) + 1,
                         "result": "ok"})
        except CtlError as exc:
            rows.append({"vhost": r.vhost, "name": r.name, "size": len(r.servers),
                         "result": str(exc)})
    return rows


def shrink(node: str) -> list[dict[str, Any]]:
    """`rabbitmq-queues shrink`: drop the member on `node` of every queue that has others."""
    rows = []
    for r in broker_of().registry.list():
        if node not in (n for _s, n in r.servers):
            continue
        try:
            delete_member(r.vhost, r.name, node)
            rows.append({"vhost": r.vhost, "name": r.name, "size": len(r.servers) - 1,
                         "result": "ok"})
        except CtlError as exc:
            rows.append({"vhost": r.vhost, "name": r.name, "size": len(r.servers),
                         "result": str(exc)})
    return rows


def rebalance() -> list[dict[str, Any]]:
    """`rabbitmq-queues rebalance quorum`: move leaders to members' least-loaded nodes."""
    broker = broker_of()
    counts: dict[str, int] = dict.fromkeys(broker.config.all_nodes, 0)
    records = sorted(broker.registry.list(), key=lambda r: (r.vhost, r.name))
    for r in records:
        if r.leader is not None:
            counts[r.leader[1]] = counts.get(r.leader[1], 0) + 1
    for r in records:
        if r.leader is None:
            continue
        target = min((n for _s, n in r.servers), key=lambda n: (counts.get(n, 0), n))
        if counts.get(target, 0) + 1 < counts[r.leader[1]]:
            new = (r.ra_name, target)
            if api.transfer_leadership(r.leader, new, 5000) == "ok":
                counts[r.leader[1]] -= 1
                counts[target] = counts.get(target, 0) + 1
                broker.metadata.command(("update_leader", r.vhost, r.name, new))
    return [{"node": n, "leaders": c} for n, c in sorted(counts.items())]


# ----------------------------------------------------------------- policies


def _master_locator() -> MasterLocator:
    """How this node takes `queue-master-locator`: as 3.10 did, or as the deprecated
    `queue_master_locator` feature, permitted or denied by its release and config."""
    broker = broker_of()
    if not broker.release.deprecated_features:
        return "unversioned"
    return "permitted" if broker.ctx.config.permits("queue_master_locator") else "denied"


def set_policy(vhost: str, name: str, pattern: str, definition: dict[str, Any],
               priority: int = 0, apply_to: str = "all") -> str:
    _vhost_known(vhost)
    locator = _master_locator()
    try:
        p = pol.validate(vhost, name, pattern, definition, priority, apply_to,
                         broker_of().release.quorum_queue_arguments, locator)
    except pol.PolicyError as exc:
        raise CtlError(str(exc))
    if locator == "permitted" and isinstance(definition, dict) \
            and "queue-master-locator" in definition:
        log.warning("Deprecated features: `queue_master_locator`: %s",
                    WHEN_PERMITTED["queue_master_locator"])
    broker_of().metadata.command(("set_policy", p))
    return "ok"


def clear_policy(vhost: str, name: str) -> str:
    """rabbitmqctl's answer is the same for a policy or a vhost that does not exist."""
    if broker_of().metadata.command(("clear_policy", vhost, name)) != "ok":
        raise CtlError("Parameter does not exist", EX_UNAVAILABLE)
    return "ok"


def list_policies(vhost: str = "/") -> list[dict[str, Any]]:
    _vhost_known(vhost)
    state = broker_of().view.state
    return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
             "definition": dict(p.definition), "priority": p.priority}
            for (vh, _n), p in sorted(state.policies.items()) if vh == vhost]


def list_exchanges(vhost: str = "/") -> list[dict[str, Any]]:
    """Like `list_queues`, nothing (not an error) for a vhost that does not exist."""
    vh = broker_of().view.state.topology.vhosts.get(vhost)
    if vh is None:
        return []
    return [{"name": x.name, "type": x.type} for x in sorted(vh.exchanges.values(),
                                                               key=lambda x: x.name)]


# ------------------------------------------------------- users, permissions


def _metadata_reply(reply: Any, user: str) -> str:
    match reply:
        case ("error", "no_such_user"):
            raise CtlError(f'User "{user}" does not exist')
        case ("error", "user_already_exists"):
            raise CtlError(f'User "{user}" already exists')
    return "ok"


def add_user(name: str, password_hash: str, hashing_algorithm: str) -> str:
    """`rabbitmqctl add_user`: no tags, no permissions. `warren ctl` hashed the
    password before sending the command (`channel.access.passwords`): none travels in clear."""
    if not name:
        raise CtlError("user name cannot be empty", 64)
    user = User(name, password_hash, hashing_algorithm=hashing_algorithm)
    return _metadata_reply(broker_of().metadata.command(("add_user", user)), name)


def change_password_hash(name: str, password_hash: str, hashing_algorithm: str) -> str:
    """`rabbitmqctl change_password` (hashed by the CLI) and `clear_password` (an
    empty hash, which no password matches)."""
    return _metadata_reply(broker_of().metadata.command(
        ("change_password_hash", name, password_hash, hashing_algorithm)), name)


def delete_user(name: str) -> str:
    return _metadata_reply(broker_of().metadata.command(("delete_user", name)), name)


def set_user_tags(name: str, tags: list[str]) -> str:
    return _metadata_reply(broker_of().metadata.command(("set_user_tags", name, tags)), name)


def _vhost_known(vhost: str) -> None:
    """The listings', `set_policy`'s and the vhost limits' refusal of a vhost that
    does not exist."""
    if vhost not in broker_of().view.state.vhosts:
        raise CtlError(f"Virtual host '{vhost}' does not exist")


def _permission_vhost_known(vhost: str) -> None:
    """`set_permissions` and `set_topic_permissions` say it otherwise (the
    `no_such_vhost` error of `rabbit_auth_backend_internal`)."""
    if vhost not in broker_of().view.state.vhosts:
        raise CtlError(f"Virtual host {vhost} does not exist", EX_UNAVAILABLE)


def set_permissions(vhost: str, name: str, configure: str, write: str, read: str) -> str:
    """`rabbitmqctl set_permissions [-p vhost] user conf write read`."""
    import re

    _permission_vhost_known(vhost)
    for regexp in (configure, write, read):
        try:
            re.compile(regexp)
        except re.error as exc:
            raise CtlError(f'invalid regular expression "{regexp}": {exc}')
    perm = Permission(configure, write, read)
    reply = broker_of().metadata.command(("set_permissions", name, vhost, perm))
    return _metadata_reply(reply, name)


def clear_permissions(vhost: str, name: str) -> str:
    """Clearing what is not there is `ok`, in a vhost that does not exist too."""
    return _metadata_reply(broker_of().metadata.command(("clear_permissions", name, vhost)),
                           name)


def list_users() -> list[dict[str, Any]]:
    users = broker_of().view.state.users
    return [{"user": u.name, "tags": list(u.tags)} for _n, u in sorted(users.items())]


def list_permissions(vhost: str = "/") -> list[dict[str, Any]]:
    _vhost_known(vhost)
    users = broker_of().view.state.users
    return [{"user": u.name, "configure": p.configure, "write": p.write, "read": p.read}
            for _n, u in sorted(users.items())
            if (p := u.permissions.get(vhost)) is not None]


# --------------------------------------------------------- topic permissions
#
# `rabbit_auth_backend_internal:set_topic_permissions` and friends: checked in
# RabbitMQ's order (the expressions, then the user, then the vhost); clearing
# never fails; the listings have `rabbitmqctl`'s columns.


def set_topic_permissions(vhost: str, name: str, exchange: str, write: str, read: str) -> str:
    """`rabbitmqctl set_topic_permissions [-p vhost] user exchange write read`."""
    for regexp in (write, read):
        reason = validate_pattern(regexp)
        if reason is not None:
            raise CtlError(f'invalid regular expression "{regexp}": {reason}')
    if name not in broker_of().view.state.users:
        raise CtlError(f'User "{name}" does not exist')
    _permission_vhost_known(vhost)
    reply = broker_of().metadata.command(
        ("set_topic_permissions", name, vhost, exchange, TopicPermission(write, read)))
    return _metadata_reply(reply, name)


def clear_topic_permissions(vhost: str, name: str, exchange: str | None = None) -> str:
    """`rabbitmqctl clear_topic_permissions [-p vhost] user [exchange]`."""
    reply = broker_of().metadata.command(("clear_topic_permissions", name, vhost, exchange))
    return _metadata_reply(reply, name)


def list_topic_permissions(vhost: str = "/") -> list[dict[str, Any]]:
    """Of one vhost: user, exchange, write, read."""
    _vhost_known(vhost)
    users = broker_of().view.state.users
    return [{"user": u.name, "exchange": x, "write": p.write, "read": p.read}
            for _n, u in sorted(users.items())
            for x, p in sorted(u.topic_permissions.get(vhost, {}).items())]


def list_user_topic_permissions(name: str) -> list[dict[str, Any]]:
    """Of one user: vhost, exchange, write, read."""
    user = broker_of().view.state.users.get(name)
    if user is None:
        raise CtlError(f'User "{name}" does not exist')
    return [{"vhost": vh, "exchange": x, "write": p.write, "read": p.read}
            for vh, per in sorted(user.topic_permissions.items())
            for x, p in sorted(per.items())]


# -------------------------------------------------------- connections, hooks


def _readers() -> list[Any]:
    listener = broker_of().listener
    return [] if listener is None else list(listener.readers.values())


def list_connections() -> list[dict[str, Any]]:
    rows = []
    for reader in _readers():
        info = _ask(reader.me) or {}
        rows.append({"pid": str(reader.me), "peer": reader.peer, "user":
                     reader.user.name if reader.user else None, "vhost": reader.vhost,
                     "state": info.get("state"), "channels": info.get("channels")})
    return rows


def list_channels() -> list[dict[str, Any]]:
    rows = []
    backend = broker_of().backend
    sessions = getattr(backend, "sessions", {})
    for reader in _readers():
        for number, ch in sorted(reader.channels.items()):
            info = _ask(ch.pid) or {}
            session = sessions.get(ch.pid)
            pending = session.pending_raft_commands() if session is not None and hasattr(
                session, "pending_raft_commands") else None
            rows.append({"pid": str(ch.pid), "connection": str(reader.me), "number": number,
                         "state": info.get("state"), "consumers": info.get("consumers"),
                         "messages_unacknowledged": info.get("unacked"),
                         "messages_unconfirmed": info.get("unconfirmed"),
                         "pending_raft_commands": pending})
    return rows


def crash_channel(pid_text: str) -> str:
    """Test hook: make a channel raise (an unexpected exception in the channel actor)."""
    for reader in _readers():
        for ch in reader.channels.values():
            if str(ch.pid) == pid_text:
                actors.send(ch.pid, ("crash",))
                return "ok"
    raise CtlError(f"no channel {pid_text}")


def crash_queue(vhost: str, name: str) -> str:
    """Test hook: kill a classic queue's process (reason ``kill``), as a crash would."""
    record = classic_queues(broker_of().view.state).get((vhost, name))
    if record is None:
        raise CtlError(f"classic queue '{name}' in vhost '{vhost}' does not exist")
    actors.exit(record.pid, "kill")
    return str(record.pid)


def set_vm_memory_high_watermark(value: float) -> str:
    return _call(ALARM_SERVER, ("set_vm_memory_high_watermark", value))


def set_disk_free_limit(value: int) -> str:
    return _call(ALARM_SERVER, ("set_disk_free_limit", value))


def stop_member(vhost: str, name: str, node: str) -> str:
    record = _record(vhost, name)
    return str(api.stop_server(RA_SYSTEM, (record.ra_name, node)))


def start_member(vhost: str, name: str, node: str) -> str:
    record = _record(vhost, name)
    result = api.restart_server(RA_SYSTEM, (record.ra_name, node))
    if result != "ok":
        raise CtlError(f"cannot restart the member of '{name}' on {node}: {result!r}", 70)
    return "ok"


def dlx_workers() -> list[dict[str, Any]]:
    counts = supervisor.count_children(DLX_SUP)
    return [{"node": actors.node(), "workers": counts.get("workers", 0)}]


# ------------------------------------------------------------ fault injection
#
# The nemesis of the scenario harness runs these on every node of a cluster.
# They change the node's own transport's `FaultRules`, which both transports
# consult for every outgoing frame (ticks included), so peers notice a fault
# the way they would notice a real one: by the net tick. Only the cluster's
# nodes are named, so the short-lived `warren ctl` node always gets through
# and `heal` / `resume_node` can reach a cut-off node.


def _faults() -> Any:
    """The `FaultRules` of this node's transport (a memory network shares one)."""
    transport = actors.get_node().transport
    faults = getattr(transport, "faults", None)
    if faults is None:
        faults = getattr(getattr(transport, "net", None), "faults", None)
    if faults is None:
        raise CtlError(f"{actors.node()} has no fault rules (no transport)", 70)
    return faults


def _cluster_node(name: str) -> str:
    """A cluster node by full name or by the part before '@' (`n1`)."""
    nodes = broker_of().config.all_nodes
    if name in nodes:
        return name
    found = [n for n in nodes if n.partition("@")[0] == name]
    if len(found) != 1:
        raise CtlError(f"{name} is not a node of the cluster ({', '.join(nodes)})")
    return found[0]


def partition(groups: list[list[str]]) -> str:
    """Frames between cluster nodes cross only within a group; nodes named nowhere pass."""
    resolved = [[_cluster_node(n) for n in group] for group in groups]
    named = [n for group in resolved for n in group]
    if len(named) != len(set(named)):
        raise CtlError("a node is named in more than one group")
    _faults().partition(*resolved, isolate_unlisted=False)
    return "ok"


def heal() -> str:
    """Remove the partition (and any drops and delays) from this node's rules."""
    _faults().heal()
    return "ok"


def pause_node(target: str | None = None) -> str:
    """A stopped node without SIGSTOP: frames between `target` and its peers wait.

    On `target` itself (the default) the pause covers its cluster peers only,
    in both directions, so `warren ctl` can still resume it. Run on a peer it
    holds that peer's frames to `target` and refuses new sessions with it, as
    a stopped process never completes a handshake; without that, a peer would
    reconnect to the paused node and see it up.
    """
    me = actors.node()
    node = me if target is None else _cluster_node(target)
    if node == me:
        _faults().pause(me, towards=[n for n in broker_of().config.all_nodes if n != me])
    else:
        _faults().pause(node)
    return "ok"


def resume_node(target: str | None = None) -> str:
    _faults().resume(actors.node() if target is None else _cluster_node(target))
    return "ok"


def _disk_wal() -> str:
    """The registered name of this node's disk WAL; refused for an in-memory Ra system."""
    handle = directory.lookup(actors.get_node(), RA_SYSTEM)
    if handle is None or not isinstance(handle.disk, DiskStore):
        raise CtlError(f"{actors.node()} has no disk WAL (started without --data-dir)")
    return handle.wal_name


def set_disk_delay(ms: int) -> str:
    """A slow disk: the WAL waits `ms` before each fdatasync (0 clears)."""
    if ms < 0:
        raise CtlError(f"disk delay must be >= 0 ms, got {ms}", 64)
    return str(_call(_disk_wal(), ("set_sync_delay", ms), WAL_CALL_TIMEOUT))


def wal_status() -> dict[str, Any]:
    """The WAL's sync delay and how many batch syncs it did, with and without delay."""
    return {"node": actors.node(), **_call(_disk_wal(), "sync_stats", WAL_CALL_TIMEOUT)}


# ------------------------------------------------------------------- limits
#
# rabbitmqctl's `set_vhost_limits` / `set_user_limits` send the definition as
# JSON text and the node parses and validates it (`rabbit_vhost_limit:parse_set`,
# `rabbit_auth_backend_internal:set_user_limits`), so the errors are the node's.


def _limits_json(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise CtlError(f"Could not parse JSON document: {exc}")


def set_vhost_limits(vhost: str, definition: str) -> str:
    """`rabbitmqctl set_vhost_limits [-p vhost] <definition>`: replaces the vhost's limits."""
    _vhost_known(vhost)
    limits = _limits_json(definition)
    errors = validate_limits(limits, VHOST_LIMITS, "limits")
    if errors:
        raise CtlError("Validation failed\n\n" + "\n".join(errors))
    broker_of().metadata.command(("set_vhost_limits", vhost, limits))
    return "ok"


def clear_vhost_limits(vhost: str) -> str:
    """Like `clear_policy`: one answer whether the vhost or its limits are missing."""
    if broker_of().metadata.command(("clear_vhost_limits", vhost)) != "ok":
        raise CtlError("Parameter does not exist", EX_UNAVAILABLE)
    return "ok"


def _json_text(limits: Any) -> str:
    import json

    return json.dumps(dict(limits), separators=(",", ":"), sort_keys=True)


def list_vhost_limits(vhost: str = "/", global_: bool = False) -> Any:
    """The vhost's limits as JSON text (nothing when none), or with `--global` a row
    per vhost that has limits."""
    limits = broker_of().view.state.vhost_limits
    if global_:
        return [{"vhost": vh, "limits": _json_text(lim)} for vh, lim in sorted(limits.items())]
    _vhost_known(vhost)
    return _json_text(limits[vhost]) if vhost in limits else []


def set_user_limits(name: str, definition: str) -> str:
    """`rabbitmqctl set_user_limits <user> <definition>`: merged into the user's limits."""
    limits = _limits_json(definition)
    errors = validate_limits(limits, USER_LIMITS, "user-limits")
    if errors:
        raise CtlError(errors[0])
    return _metadata_reply(broker_of().metadata.command(("set_user_limits", name, limits)),
                           name)


def clear_user_limits(name: str, limit_type: str) -> str:
    """`rabbitmqctl clear_user_limits <user> <limit_type> | all`."""
    reply = broker_of().metadata.command(("clear_user_limits", name, limit_type))
    return _metadata_reply(reply, name)


def list_user_limits(name: str = "guest", global_: bool = False) -> Any:
    """The user's limits as JSON text (`{}` when none), or with `--global` a row per
    user that has limits."""
    users = broker_of().view.state.users
    if global_:
        return [{"user": u.name, "limits": _json_text(u.limits)}
                for _n, u in sorted(users.items()) if u.limits]
    user = users.get(name)
    if user is None:
        raise CtlError(f'User "{name}" does not exist')
    return _json_text(user.limits)
