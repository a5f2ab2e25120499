"""The metadata store as a Ra machine: vhosts, users (with their permissions
and topic permissions), exchanges, bindings, queues, policies and vhost /
user limits of the whole cluster.

RabbitMQ 4 keeps this in Khepri, a Ra cluster with one member per node; every
change is a replicated command, so every node sees the same exchanges, queues
and policies in the same order. `MetadataMachine` is that machine for warren:
pure, deterministic, answering each command with RabbitMQ's reply or error
term (`("error", (amqp_error_name, text))`, which the caller turns back into
an `AmqpError`).

The state is never mutated in place: `apply` builds a new `MetadataState`
that shares what did not change. That is what makes Khepri-style
*projections* cheap: after every change the machine emits a `local` send of
the new state to the node's `warren_metadata` process on every member (each
member executes it for its own node), which keeps it as the node's read
copy. Channels route from that copy without asking Ra.

Users hold salted password hashes (`channel.access.passwords`). A user record stored
by an older warren held its password in clear: the leader's `tick` hands such
records to its node (`broker.users.hash_passwords`), which hashes them off the
machine (the salt is random, and a machine must be deterministic) and commits
`hash_passwords`; applying it replaces each record whose password the hash
matches and releases the log up to that entry, so the snapshot written then
holds no cleartext and the older entries that did are deleted with the log
below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from broker import policy as pol
from broker.policy import Policy
from channel.access.auth import User, default_user
from channel.access.passwords import password_matches
from channel.access.permissions import Permission
from channel.access.topic_permissions import TopicPermission
from channel.errors import AmqpError
from channel.exchanges.exchange import Topology, _VHost
from channel.queue_types.classic.classic_directory import ClassicRecord
from channel.queue_types.queue_args import Declared, check_equivalence
from channel.queue_types.queue_registry import QueueRecord
from releases import DEFAULT_SERIES, RELEASES

__all__ = [
    "CLUSTER_NAME",
    "LOG_INIT_ARGS",
    "PROJECTION",
    "MetadataMachine",
    "MetadataState",
    "effective_policy",
    "initial_state",
]

CLUSTER_NAME = "warren_metadata"
"""The Ra cluster (and each member's registered name) of the metadata store."""
PROJECTION = "warren_metadata_view"
"""Registered name of the process on each node that keeps the read copy."""

LOG_INIT_ARGS = {"min_snapshot_interval": 0}
"""The metadata members' log settings: the machine releases its log only after
`hash_passwords`, and that snapshot must be taken however short the log is."""

QueueKey = tuple[str, str]


@dataclass(frozen=True)
class MetadataState:
    vhosts: tuple[str, ...] = ("/",)
    users: Mapping[str, User] = field(default_factory=dict)
    topology: Topology = field(default_factory=Topology)
    queues: Mapping[QueueKey, QueueRecord] = field(default_factory=dict)
    policies: Mapping[QueueKey, Policy] = field(default_factory=dict)
    vhost_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """vhost -> its `vhost-limits` definition (`max-connections`, `max-queues`)."""
    classic_queues: Mapping[QueueKey, ClassicRecord] = field(default_factory=dict)
    """Classic queues of every node: the pid of each queue's process names its home."""
    vhost_metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """vhost -> its metadata (`description`, `tags`, `default_queue_type`) where set."""


def vhost_metadata(s: MetadataState, vhost: str) -> Mapping[str, Any]:
    """What `add_vhost` recorded about `vhost` (a state written before it existed has none)."""
    return getattr(s, "vhost_metadata", {}).get(vhost, {})


def classic_queues(s: MetadataState) -> Mapping[QueueKey, ClassicRecord]:
    """The classic queue table (a state written before it existed has none)."""
    return getattr(s, "classic_queues", {})


def initial_state() -> MetadataState:
    """RabbitMQ's first boot: vhost `/`, user guest/guest with access to it."""
    return MetadataState(users={"guest": default_user()})


def effective_policy(state: MetadataState, vhost: str, name: str,
                     queue_type: str = "quorum") -> Policy | None:
    return pol.matching_policy(state.policies.values(), vhost, "queue", name, queue_type)


def _queue_type(record: QueueRecord) -> str:
    return str(record.arguments.get("x-queue-type", "quorum"))


def _cow_topology(t: Topology, vhost: str | None) -> Topology:
    """A copy of `t` whose `vhost` entry may be changed without touching `t`."""
    new = Topology(vhosts=())
    new.vhosts = dict(t.vhosts)
    if vhost is not None and vhost in t.vhosts:
        old = t.vhosts[vhost]
        new.vhosts[vhost] = _VHost(dict(old.exchanges),
                                   {k: list(v) for k, v in old.bindings.items()})
    return new


class MetadataMachine:
    """`ra_machine` callbacks for the metadata store (duck-typed like `ra.machine.Machine`)."""

    def init(self, _config: Mapping[str, Any]) -> MetadataState:
        return initial_state()

    def version(self) -> int:
        return 0

    def which_module(self, _version: int) -> MetadataMachine:
        return self

    def tick(self, _time_ms: int, s: MetadataState) -> list[Any]:
        """On the leader: users still stored in clear go to the node to be hashed."""
        cleartext = tuple(u for u in s.users.values() if u.is_cleartext)
        if not cleartext:
            return []
        return [("mod_call", "broker.users", "hash_passwords", [cleartext])]

    def overview(self, s: MetadataState) -> dict[str, Any]:
        return {"vhosts": len(s.vhosts), "users": len(s.users), "queues": len(s.queues),
                "policies": len(s.policies)}

    def apply(self, meta: Mapping[str, Any], cmd: Any, s: MetadataState) -> tuple[Any, ...]:
        """Reply ``(index, reply)``: the index lets a caller wait until its own
        node's copy has applied the command (read-your-writes)."""
        index = meta["index"]
        try:
            new, reply, effects = self._apply(cmd, s, index)
        except AmqpError as exc:
            new, reply, effects = s, ("error", (exc.name, exc.explanation)), []
        projection = ("send_msg", PROJECTION, ("metadata_state", index, new), ["local"])
        return (new, (index, reply), [*effects, projection])

    # ------------------------------------------------------------------ commands

    def _apply(self, cmd: Any, s: MetadataState,
               index: int) -> tuple[MetadataState, Any, list[Any]]:
        match cmd:
            case ("add_vhost", vhost):
                return self._add_vhost(s, vhost, {})
            case ("add_vhost", vhost, dict() as metadata):
                return self._add_vhost(s, vhost, metadata)
            case ("delete_vhost", vhost):
                return self._delete_vhost(s, vhost)
            case ("add_user", User() as added):
                if added.name in s.users:
                    return s, ("error", "user_already_exists"), []
                return replace(s, users={**s.users, added.name: added}), "ok", []
            case ("change_password_hash", name, str() as password_hash, str() as algorithm):
                return self._update_user(s, name, password_hash=password_hash,
                                         hashing_algorithm=algorithm)
            case ("hash_passwords", tuple() as conversions):
                return self._hash_passwords(s, conversions, index)
            case ("set_user_tags", name, tags):
                return self._update_user(s, name, tags=tuple(tags))
            case ("set_permissions", name, vhost, Permission() as perm):
                self._vhost(s, vhost)
                user = s.users.get(name)
                perms = {**(user.permissions if user else {}), vhost: perm}
                return self._update_user(s, name, permissions=perms)
            case ("clear_permissions", name, vhost):
                user = s.users.get(name)
                perms = {k: v for k, v in (user.permissions if user else {}).items()
                         if k != vhost}
                return self._update_user(s, name, permissions=perms)
            case ("set_topic_permissions", name, vhost, exchange, TopicPermission() as perm):
                user = s.users.get(name)  # the user is checked before the vhost
                if user is None:
                    return s, ("error", "no_such_user"), []
                self._vhost(s, vhost)
                per_vhost = {**user.topic_permissions.get(vhost, {}), exchange: perm}
                topic = {**user.topic_permissions, vhost: per_vhost}
                return self._update_user(s, name, topic_permissions=topic)
            case ("clear_topic_permissions", name, vhost, exchange):
                return self._clear_topic_permissions(s, name, vhost, exchange)
            case ("set_user_limits", name, limits):
                user = s.users.get(name)  # merged into the user's limits, as RabbitMQ does
                merged = {**(user.limits if user else {}), **limits}
                return self._update_user(s, name, limits=merged)
            case ("clear_user_limits", name, limit_type):
                user = s.users.get(name)
                kept = {} if limit_type == "all" else {
                    k: v for k, v in (user.limits if user else {}).items() if k != limit_type}
                return self._update_user(s, name, limits=kept)
            case ("set_vhost_limits", vhost, limits):
                self._vhost(s, vhost)  # the definition replaces the vhost's previous one
                return replace(s, vhost_limits={**s.vhost_limits, vhost: dict(limits)}), "ok", []
            case ("clear_vhost_limits", vhost):
                if vhost not in s.vhost_limits:
                    return s, ("error", "not_found"), []
                kept_vhosts = {k: v for k, v in s.vhost_limits.items() if k != vhost}
                return replace(s, vhost_limits=kept_vhosts), "ok", []
            case ("delete_user", name):
                if name not in s.users:
                    return s, ("error", "no_such_user"), []
                users = dict(s.users)
                del users[name]
                return replace(s, users=users), "ok", []
            case ("declare_exchange", vhost, name, type_, flags, arguments):
                self._vhost(s, vhost)
                if s.topology.lookup(vhost, name) is not None:
                    s.topology.declare(vhost, name, type_, **flags, arguments=arguments)
                    return s, "ok", []
                t = _cow_topology(s.topology, vhost)
                t.declare(vhost, name, type_, **flags, arguments=arguments)
                return replace(s, topology=t), "ok", []
            case ("delete_exchange", vhost, name, if_unused):
                self._vhost(s, vhost)
                t = _cow_topology(s.topology, vhost)
                t.delete(vhost, name, if_unused=if_unused)
                return replace(s, topology=t), "ok", []
            case ("bind", vhost, source, kind, destination, key, arguments):
                self._vhost(s, vhost)
                t = _cow_topology(s.topology, vhost)
                t.bind(vhost, source, kind, destination, key, arguments, lambda _q: True)
                return replace(s, topology=t), "ok", []
            case ("unbind", vhost, source, kind, destination, key, arguments):
                self._vhost(s, vhost)
                t = _cow_topology(s.topology, vhost)
                t.unbind(vhost, source, kind, destination, key, arguments)
                return replace(s, topology=t), "ok", []
            case ("declare_queue", QueueRecord() as record):
                key = (record.vhost, record.name)
                self._vhost(s, record.vhost)
                if key in s.queues:
                    return s, ("existing", s.queues[key]), []
                found = effective_policy(s, record.vhost, record.name, _queue_type(record))
                record = replace(record, policy=dict(found.definition) if found else {})
                return replace(s, queues={**s.queues, key: record}), ("created", record), []
            case ("declare_classic_queue", ClassicRecord() as classic):
                return self._declare_classic(s, classic)
            case ("recover_classic_queue", ClassicRecord() as classic):
                return self._recover_classic(s, classic)
            case ("delete_classic_queue", vhost, name, pid):
                return self._delete_classic(s, [(vhost, name)], pid)
            case ("classic_node_down", str() as node):
                # as rabbit_amqqueue:on_node_down: the node's transient queues go
                gone = [k for k, r in classic_queues(s).items()
                        if r.node == node and not r.durable]
                return self._delete_classic(s, gone, None)
            case ("delete_queue", vhost, name):
                key = (vhost, name)
                if key not in s.queues:
                    return s, ("ok", None), []
                queues = dict(s.queues)
                record = queues.pop(key)
                t = _cow_topology(s.topology, vhost)
                t.remove_queue(vhost, name)
                return replace(s, queues=queues, topology=t), ("ok", record), []
            case ("update_leader", vhost, name, leader):
                return self._update_queue(s, (vhost, name), leader=leader)
            case ("update_members", vhost, name, servers):
                return self._update_queue(s, (vhost, name), servers=tuple(servers))
            case ("set_policy", Policy() as p):
                self._vhost(s, p.vhost)
                policies = {**s.policies, (p.vhost, p.name): p}
                return self._repolicy(s, policies)
            case ("clear_policy", vhost, name):
                if (vhost, name) not in s.policies:
                    return s, ("error", "not_found"), []
                policies = dict(s.policies)
                del policies[(vhost, name)]
                return self._repolicy(s, policies)
        return s, ("error", ("unknown_command", cmd)), []

    @staticmethod
    def _add_vhost(s: MetadataState, vhost: str,
                   metadata: Mapping[str, Any]) -> tuple[MetadataState, Any, list[Any]]:
        """A vhost that exists is left as it is (`add_vhost` is idempotent)."""
        if vhost in s.vhosts:
            return s, "ok", []
        t = _cow_topology(s.topology, None)
        t.add_vhost(vhost)
        new = replace(s, vhosts=(*s.vhosts, vhost), topology=t)
        if metadata:
            new = replace(new, vhost_metadata={**getattr(s, "vhost_metadata", {}),
                                               vhost: dict(metadata)})
        return new, "ok", []

    def _delete_vhost(self, s: MetadataState,
                      vhost: str) -> tuple[MetadataState, Any, list[Any]]:
        """The vhost and everything in it: exchanges, bindings, queue records,
        policies, limits, metadata and every user's permissions on it (its queues'
        processes and Ra clusters are stopped by the caller first)."""
        self._vhost(s, vhost)
        t = _cow_topology(s.topology, None)
        del t.vhosts[vhost]
        users = {name: replace(
            u, permissions={v: p for v, p in u.permissions.items() if v != vhost},
            topic_permissions={v: p for v, p in u.topic_permissions.items() if v != vhost})
            for name, u in s.users.items()}
        return replace(
            s, vhosts=tuple(v for v in s.vhosts if v != vhost), topology=t, users=users,
            queues={k: r for k, r in s.queues.items() if k[0] != vhost},
            classic_queues={k: r for k, r in classic_queues(s).items() if k[0] != vhost},
            policies={k: p for k, p in s.policies.items() if k[0] != vhost},
            vhost_limits={v: lim for v, lim in s.vhost_limits.items() if v != vhost},
            vhost_metadata={v: m for v, m in getattr(s, "vhost_metadata", {}).items()
                            if v != vhost}), "ok", []

    def _declare_classic(self, s: MetadataState,
                         record: ClassicRecord) -> tuple[MetadataState, Any, list[Any]]:
        key = (record.vhost, record.name)
        self._vhost(s, record.vhost)
        table = classic_queues(s)
        if key in table:
            return s, ("existing", table[key]), []
        if key in s.queues:  # a quorum queue of that name came first
            existing = s.queues[key]
            # a replicated decision, the same on every member whatever its release:
            # the default release's argument list (3.10 to 4.2 share it)
            check_equivalence(record.name, record.vhost,
                              Declared(existing.durable, False, existing.arguments),
                              Declared(record.durable, record.auto_delete, record.arguments),
                              RELEASES[DEFAULT_SERIES].quorum_queue_arguments)
            return s, ("existing", None), []
        return (replace(s, classic_queues={**table, key: record}), ("created", record), [])

    @staticmethod
    def _recover_classic(s: MetadataState,
                         record: ClassicRecord) -> tuple[MetadataState, Any, list[Any]]:
        """A durable queue restarted on its home node: its record now names the new
        process and its bindings stay (``rabbit_amqqueue:recover``). A queue deleted
        while its node was down, or whose name another node's queue took, is not
        recovered (``("gone", None)`` / ``("existing", other)``)."""
        key = (record.vhost, record.name)
        table = classic_queues(s)
        old = table.get(key)
        if old is None:
            return s, ("gone", None), []
        if old.node != record.node:
            return s, ("existing", old), []
        return replace(s, classic_queues={**table, key: record}), ("ok", record), []

    @staticmethod
    def _delete_classic(s: MetadataState, keys: list[QueueKey],
                        pid: Any) -> tuple[MetadataState, Any, list[Any]]:
        """Remove these records (only if they name `pid`, when given) and their bindings."""
        table = dict(classic_queues(s))
        gone = [k for k in keys if k in table and (pid is None or table[k].pid == pid)]
        if not gone:
            return s, ("ok", 0), []
        topology = s.topology
        for vhost, name in gone:
            del table[(vhost, name)]
            topology = _cow_topology(topology, vhost)
            topology.remove_queue(vhost, name)
        return replace(s, classic_queues=table, topology=topology), ("ok", len(gone)), []

    @staticmethod
    def _vhost(s: MetadataState, vhost: str) -> None:
        if vhost not in s.vhosts:
            raise AmqpError("NOT_FOUND", f"no vhost '{vhost}'")

    @staticmethod
    def _update_user(s: MetadataState, name: str,
                     **changes: Any) -> tuple[MetadataState, Any, list[Any]]:
        user = s.users.get(name)
        if user is None:
            return s, ("error", "no_such_user"), []
        return replace(s, users={**s.users, name: replace(user, **changes)}), "ok", []

    @staticmethod
    def _hash_passwords(s: MetadataState, conversions: tuple[tuple[str, str, str], ...],
                        index: int) -> tuple[MetadataState, Any, list[Any]]:
        """Replace each cleartext record by its hash, if the hash is of that password
        (a record changed meanwhile, or converted by an earlier command, is left).
        When something changed, the log is released up to here: the snapshot then
        written holds only hashes, and the entries below it go."""
        users = dict(s.users)
        for name, password_hash, algorithm in conversions:
            user = users.get(name)
            if user is not None and user.is_cleartext and password_matches(
                    password_hash, algorithm, user.password_hash):
                users[name] = replace(user, password_hash=password_hash,
                                      hashing_algorithm=algorithm)
        if users == dict(s.users):
            return s, "ok", []
        new = replace(s, users=users)
        return new, "ok", [("release_cursor", index, new)]

    @classmethod
    def _clear_topic_permissions(cls, s: MetadataState, name: str, vhost: str,
                                 exchange: str | None) -> tuple[MetadataState, Any, list[Any]]:
        """Those of one exchange, or (`exchange` None) all of the vhost's; like
        RabbitMQ, clearing what is not there (even for an unknown user) is ok."""
        user = s.users.get(name)
        if user is None or vhost not in user.topic_permissions:
            return s, "ok", []
        kept = {} if exchange is None else {
            x: p for x, p in user.topic_permissions[vhost].items() if x != exchange}
        topic = {vh: per for vh, per in user.topic_permissions.items() if vh != vhost}
        if kept:
            topic[vhost] = kept
        return cls._update_user(s, name, topic_permissions=topic)

    @staticmethod
    def _update_queue(s: MetadataState, key: QueueKey,
                      **changes: Any) -> tuple[MetadataState, Any, list[Any]]:
        record = s.queues.get(key)
        if record is None:
            return s, ("error", "not_found"), []
        new = replace(record, **changes)
        if new == record:
            return s, "ok", []
        return replace(s, queues={**s.queues, key: new}), "ok", []

    @staticmethod
    def _repolicy(s: MetadataState, policies: dict[QueueKey, Policy],
                  ) -> tuple[MetadataState, Any, list[Any]]:
        """Recompute every queue's effective policy; report the queues that changed."""
        s = replace(s, policies=policies)
        queues = dict(s.queues)
        changed: list[QueueRecord] = []
        for key, record in s.queues.items():
            found = effective_policy(s, record.vhost, record.name, _queue_type(record))
            definition = dict(found.definition) if found else {}
            if definition != dict(record.policy):
                queues[key] = replace(record, policy=definition)
                changed.append(queues[key])
        effects: list[Any] = []
        if changed:
            effects.append(("mod_call", "broker.hooks", "policy_changed", [changed]))
        return replace(s, queues=queues), "ok", effects
