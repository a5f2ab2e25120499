"""Arrow schemas of every history table, and which event kind lands in which table.

One definition shared by the recorder (writes), compaction (rewrites) and the loader
(validates), so a field added here reaches every stage. `SCHEMA_VERSION` is stored in
the metadata of every file; readers refuse an unknown major version.
"""

from __future__ import annotations

import pyarrow as pa

# 1.1: replica_events ready, checked_out, dlx_worker_checkout; 1.2: replica_events settled;
# 1.3: queue_events (what a classic queue process did with each message)
SCHEMA_VERSION = "1.3"
SCHEMA_VERSION_KEY = b"warren.schema_version"
SUPPORTED_MAJOR = 1

_STR = pa.string()
_I64 = pa.int64()
_I32 = pa.int32()
_BOOL = pa.bool_()
_LIST_STR = pa.list_(pa.string())

ENVELOPE: list[tuple[str, pa.DataType]] = [
    ("run_id", _STR),
    ("node", _STR),
    ("emitter", _STR),
    ("seq", _I64),
    ("ts_ns", _I64),
    ("wall_ns", _I64),
    ("kind", _STR),
]
# Fields an emitter passed that its table does not know, as a JSON object: nothing
# emitted is silently dropped.
EXTRA: tuple[str, pa.DataType] = ("extra", _STR)

_TABLE_FIELDS: dict[str, list[tuple[str, pa.DataType]]] = {
    "client_ops": [
        ("queue", _STR),
        ("conn_id", _STR),
        ("channel_id", _I32),
        ("msg_id", _I64),
        ("pub_chan", _STR),
        ("pub_seq", _I64),
        ("body_digest", _I64),
        ("consumer_tag", _STR),
        ("delivery_tag", _I64),
        ("redelivered", _BOOL),
        ("delivery_count", _I32),
        ("requeue", _BOOL),
        ("multiple", _BOOL),
        ("outcome", _STR),
        ("error", _STR),
    ],
    "channel_events": [
        ("queue", _STR),
        ("conn_id", _STR),
        ("channel_id", _I32),
        ("msg_id", _I64),
        ("pub_seq", _I64),
        ("consumer_tag", _STR),
        ("delivery_tag", _I64),
        ("raft_correlation", _I64),
    ],
    "replica_events": [
        ("queue", _STR),
        ("server", _STR),
        ("role", _STR),
        ("raft_term", _I64),
        ("raft_index", _I64),
        ("cmd_type", _STR),
        ("cmd_digest", _I64),
        ("state_digest", _I64),
        ("msg_id", _I64),
        ("consumer_key", _STR),
        ("consumer_node", _STR),
        ("attempt", _I32),
        ("reason", _STR),
        ("leader", _STR),
        ("members", _LIST_STR),
        ("value", _I64),
        ("ready", _I64),
        ("checked_out", _I64),
    ],
    # What a queue process (a classic queue's `rabbit_amqqueue_process`) did: its
    # declaration (type, durability, exclusivity; the row's `node` is its home), each
    # message it took, handed out, got settled, dropped or dead-lettered, its deletion.
    "queue_events": [
        ("queue", _STR),
        ("queue_type", _STR),
        ("msg_id", _I64),
        ("queue_seq", _I64),
        ("persistent", _BOOL),
        ("channel", _STR),
        ("consumer_tag", _STR),
        ("redelivered", _BOOL),
        ("ack_required", _BOOL),
        ("outcome", _STR),
        ("reason", _STR),
        ("durable", _BOOL),
        ("exclusive", _BOOL),
        ("auto_delete", _BOOL),
        ("value", _I64),
    ],
    "flow_events": [
        ("entity_type", _STR),
        ("entity_id", _STR),
        ("queue", _STR),
        ("value", _I64),
    ],
    "supervision_events": [
        ("actor_path", _STR),
        ("actor_class", _STR),
        ("supervisor", _STR),
        ("reason", _STR),
        ("restart_count", _I32),
        ("monitor_of", _STR),
    ],
    "nemesis_events": [
        ("fault", _STR),
        ("targets", _LIST_STR),
        ("params", _STR),
    ],
    "samples": [
        ("cpu_user_s", pa.float64()),
        ("cpu_sys_s", pa.float64()),
        ("rss_bytes", _I64),
        ("mailbox_max", _I64),
        ("open_channels", _I64),
    ],
    "run_meta": [
        ("started_wall_ns", _I64),
        ("warren_version", _STR),
        ("config_json", _STR),
        ("queues_json", _STR),
        ("workload", _STR),
        ("state_digest_every", _I64),
        ("drain_expected", _BOOL),
    ],
    # Kinds no table claims (runtime diagnostics such as process_start) keep their
    # fields in `extra`.
    "other_events": [],
}

TABLES: tuple[str, ...] = tuple(_TABLE_FIELDS)

KINDS: dict[str, tuple[str, ...]] = {
    "client_ops": (
        "publish", "confirm", "pub_nack", "pub_timeout", "return", "consume_ok", "cancel",
        "deliver", "get_ok", "get_empty", "ack", "nack", "reject", "channel_open",
        "channel_close", "conn_close", "drain_start", "drain_end",
    ),
    "channel_events": (
        "publish_in", "enqueue_sent", "confirm_out", "deliver_out", "settle_in", "resend",
    ),
    "replica_events": (
        "applied", "leader_elected", "leader_seen", "role_change", "service_queue",
        "local_delivery", "snapshot_taken", "snapshot_installed", "recovered",
        "dlx_discard", "dlx_settled", "wal_batch", "dlx_worker_checkout", "settled",
    ),
    "queue_events": (
        "queue_declared", "queue_enqueued", "queue_delivered", "queue_settled",
        "queue_dropped", "queue_deleted",
    ),
    "flow_events": (
        "credit_blocked", "credit_unblocked", "soft_limit_on", "soft_limit_off",
        "mem_alarm_on", "mem_alarm_off", "disk_alarm_on", "disk_alarm_off",
    ),
    "supervision_events": (
        "started", "crashed", "restarted", "stopped", "down_sent", "down_received",
        "intensity_exceeded",
    ),
    "nemesis_events": ("start", "stop"),
    "samples": ("sample",),
    "run_meta": ("run_meta",),
    "other_events": (),
}

KIND_TABLE: dict[str, str] = {k: t for t, kinds in KINDS.items() for k in kinds}


def table_for(kind: str) -> str:
    """The table an event kind is recorded in; unknown kinds go to `other_events`."""
    return KIND_TABLE.get(kind, "other_events")


def fields_of(table: str) -> list[tuple[str, pa.DataType]]:
    """Payload columns of `table` (without envelope and `extra`)."""
    return list(_TABLE_FIELDS[table])


def schema_of(table: str) -> pa.Schema:
    """The full Arrow schema of `table`, with the schema version in its metadata."""
    fields = [pa.field(n, t) for n, t in (*ENVELOPE, *_TABLE_FIELDS[table], EXTRA)]
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode()})


def major_of(version: str) -> int:
    """Major part of a schema version string; raises ValueError when malformed."""
    return int(version.split(".", 1)[0])


def check_version(metadata: dict[bytes, bytes] | None) -> str:
    """The file's schema version; ValueError when missing or of an unknown major."""
    raw = (metadata or {}).get(SCHEMA_VERSION_KEY)
    if raw is None:
        raise ValueError("file has no warren.schema_version metadata")
    version = raw.decode()
    if major_of(version) != SUPPORTED_MAJOR:
        raise ValueError(f"unsupported history schema version {version}")
    return version
