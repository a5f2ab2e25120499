"""The AMQP 0-9-1 side of a warren node: connections, channels, flow control.

One TCP connection is served by a `reader` process (socket input, connection
methods, credit and throttle), one `channel` process per AMQP channel (the
protocol logic, routing through `exchange`/`routing`, queues through a
`backend.QueueBackend`) and one `writer` process per channel (ordered output).
`credit_flow` is the pure accounting that makes a slow channel stop the reader
from reading the socket. See docs/channel.md.
"""

from ra.stored_terms import register_module_renames

#: Where each module of the flat layout of earlier releases now lives: records
#: they pickled into a node's Ra log and snapshots (users, permissions, queue
#: records, messages) name those paths and must still load after an upgrade.
MOVED_MODULES = {
    f"channel.{old}": f"channel.{new}" for old, new in {
        "auth": "access.auth",
        "permissions": "access.permissions",
        "topic_permissions": "access.topic_permissions",
        "channel": "connection.channel",
        "config": "connection.config",
        "confirms": "connection.confirms",
        "connection_sup": "connection.connection_sup",
        "listener": "connection.listener",
        "queue_collector": "connection.queue_collector",
        "reader": "connection.reader",
        "trace_ids": "connection.trace_ids",
        "unacked": "connection.unacked",
        "exchange": "exchanges.exchange",
        "routing": "exchanges.routing",
        "alarm": "limits.alarm",
        "credit_flow": "limits.credit_flow",
        "limiter": "limits.limiter",
        "limits": "limits.limits",
        "memory_monitor": "limits.memory_monitor",
        "throttle": "limits.throttle",
        "assembler": "protocol.assembler",
        "framing": "protocol.framing",
        "heartbeat": "protocol.heartbeat",
        "tune": "protocol.tune",
        "wire": "protocol.wire",
        "writer": "protocol.writer",
        "backend": "queue_types.backend",
        "consumer_args": "queue_types.consumer_args",
        "consumer_timeout": "queue_types.consumer_timeout",
        "qq_death": "queue_types.qq_death",
        "qq_message": "queue_types.qq_message",
        "queue_args": "queue_types.queue_args",
        "queue_registry": "queue_types.queue_registry",
        "qq_cluster": "queue_types.quorum.qq_cluster",
        "qq_dead_letter": "queue_types.quorum.qq_dead_letter",
        "qq_dlx_router": "queue_types.quorum.qq_dlx_router",
        "qq_registry": "queue_types.quorum.qq_registry",
        "quorum_queue": "queue_types.quorum.quorum_queue",
        "testing": "queue_types.testing",
    }.items()
}
register_module_renames(MOVED_MODULES)
