"""The RabbitMQ releases warren can be asked to behave as, and what each one selects.

A node's `rabbitmq_version` names a release series ("4.2"); `releases.table`
maps it to one frozen `Release` record, and every version-dependent choice of
the channel, the broker and the queue types is read from that record rather than
from a constant of its own. The package imports nothing of warren's, so every
layer (fifo, channel, the classic queue type, broker) can ask it.
"""

from releases.deprecations import WHEN_PERMITTED, permitted, when_denied
from releases.table import (
    CAPABILITIES,
    DEFAULT_SERIES,
    RELEASES,
    Release,
    ServerIdentity,
    UnknownRelease,
    UnmodelledRelease,
    lookup,
    modelled_series,
)

__all__ = [
    "CAPABILITIES",
    "DEFAULT_SERIES",
    "RELEASES",
    "WHEN_PERMITTED",
    "Release",
    "ServerIdentity",
    "UnknownRelease",
    "UnmodelledRelease",
    "lookup",
    "modelled_series",
    "permitted",
    "when_denied",
]
