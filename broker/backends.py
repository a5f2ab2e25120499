"""The queue backends a node can run, by the name used in its config.

`rabbit` (the default) is RabbitMQ's queues: `channel.queue_types.quorum.quorum_queue` over
the node's `MetadataRegistry`, so quorum queues are Ra clusters reachable from every
node, and declares that resolve to the classic type go to
`channel.queue_types.classic.classic_queue`, one queue process per queue under the node's
queue supervisor, recorded in the metadata store so that channels on every node
find it. `quorum` is its former name, still accepted so that old configs and
scripts keep working: it never meant "quorum queues only".

`memory` is `channel.queue_types.testing`'s in-memory, node-local backend: queues live on
the node whose channel declared them, while exchanges and bindings are the
cluster's (its deleted queues drop their bindings through the store). It is a
stand-in for tests: no TTL, dead lettering, length limits, priorities or
durability.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.node import BrokerNode

__all__ = ["ALIASES", "DEFAULT", "NAMES", "canonical", "memory", "quorum", "rabbit"]

#: the backend a node runs unless configured otherwise
DEFAULT = "rabbit"
#: the names a config may give, each with the `module:factory` it runs
NAMES = {"rabbit": "broker.backends:rabbit", "memory": "broker.backends:memory"}
#: former names, read as the name they stand for
ALIASES = {"quorum": "rabbit"}


def canonical(name: str) -> str:
    """`name` with a former name replaced by the current one."""
    return ALIASES.get(name, name)


def memory(broker: BrokerNode) -> Any:
    from channel.queue_types.testing import MemoryBackend

    return MemoryBackend(broker.node, on_deleted=broker.topology.remove_queue)


def rabbit(broker: BrokerNode) -> Any:
    from broker.metadata import vhost_metadata
    from channel.queue_types.classic.classic_dead_letter import ClassicDeadLetter
    from channel.queue_types.classic.classic_queue import ClassicBackend
    from channel.queue_types.quorum.quorum_queue import QuorumBackend
    from releases import permitted

    classic = ClassicBackend(broker.node, on_deleted=broker.topology.remove_queue,
                             directory=broker.classic_directory,
                             home_down_retries=broker.release.classic_home_down_retries,
                             record_queue_type=broker.release.declare_records_queue_type,
                             last_death_headers=broker.release.last_death_headers,
                             reconsume_on_queue_down=(
                                 broker.release.classic_reconsume_on_queue_down))
    classic.set_dead_letter(ClassicDeadLetter(broker.topology, classic, broker.registry))
    backend = QuorumBackend(broker.node, broker.registry, classic=classic,
                            default_queue_type=broker.config.default_queue_type,
                            net_ticktime=int(broker.config.net_ticktime))
    backend.vhost_default_queue_type = lambda vhost: vhost_metadata(
        broker.view.state, vhost).get("default_queue_type")
    overrides = dict(broker.config.amqp.get("deprecated_features_permit") or {})
    backend.permits = lambda feature: permitted(broker.release, feature, overrides)
    return backend


#: the factory under its former name, for configs naming `broker.backends:quorum`
quorum = rabbit
