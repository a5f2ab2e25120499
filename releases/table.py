"""One record per RabbitMQ release series: every behaviour warren selects by version.

Why one table: RabbitMQ's behaviour changed between releases in ways clients and
operators notice (the `rabbit_fifo` machine version a new quorum queue runs, the
default delivery limit, what `x-delivery-count` carries, who times out a slow
consumer, which deprecated features are permitted, what `connection.start`
says). Keeping each of those choices in the record of the release that makes it
lets a node be switched from one release to another by one configuration key,
and makes a difference between two releases a difference between two rows.

Every value is read from upstream at the tag named in the record (or, for the
platform string, from a real broker of that release): `rabbit_fifo:version/0`,
`rabbit_quorum_queue`'s DEFAULT_DELIVERY_LIMIT, the `-rabbit_deprecated_feature`
attributes, `rabbit_reader:server_properties/1` and `server_capabilities/1`,
`rabbit.hrl`'s copyright and information texts, `rabbit_framing.hrl`'s
FRAME_MIN_SIZE and `rabbit_command_assembler`'s content header check.

Pure data and lookups: no I/O, and no imports of warren's, so every layer can ask.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "CAPABILITIES",
    "DEFAULT_SERIES",
    "RELEASES",
    "Release",
    "ServerIdentity",
    "UnknownRelease",
    "UnmodelledRelease",
    "lookup",
    "modelled_series",
]

#: `rabbit_reader:server_capabilities(rabbit_framing_amqp_0_9_1)`, in upstream's
#: order; the same list from 3.10 to 4.3.
CAPABILITIES: tuple[str, ...] = (
    "publisher_confirms", "exchange_exchange_bindings", "basic.nack",
    "consumer_cancel_notify", "connection.blocked", "consumer_priorities",
    "authentication_failure_close", "per_consumer_qos", "direct_reply_to",
)

_MPL = "Licensed under the MPL 2.0. Website: https://rabbitmq.com"

Phase = Literal["permitted_by_default", "denied_by_default", "removed"]


@dataclass(frozen=True)
class ServerIdentity:
    """What `connection.start`'s server properties say the broker is.

    `platform` is `"Erlang/OTP " ++ OTP_VERSION` of the Erlang the release runs on,
    so it depends on the installation; each record names the Erlang of the package
    warren is compared against.
    """

    product: str
    version: str
    platform: str
    copyright: str
    information: str
    capabilities: tuple[str, ...] = CAPABILITIES

    def properties(self) -> dict[str, Any]:
        """The server-properties table without `cluster_name` (the node adds it)."""
        return {"capabilities": {name: True for name in self.capabilities},
                "product": self.product, "version": self.version,
                "platform": self.platform, "copyright": self.copyright,
                "information": self.information}


@dataclass(frozen=True)
class Release:
    """What one RabbitMQ release series does, where warren can behave either way."""

    series: str
    """The name a node's `rabbitmq_version` takes: "4.2"."""
    server: ServerIdentity
    machine_version: int
    """`rabbit_fifo:version()` of the release: the machine a new quorum queue runs."""
    default_delivery_limit: int | None
    """A quorum queue's delivery limit when neither argument nor policy sets one
    (None: unlimited, as before 4.0)."""
    delivery_count_header: Literal["acquired_count", "delivery_count"]
    """Which per-message counter `x-delivery-count` carries on a redelivery."""
    requeue_counts_toward_limit: bool
    """Whether `basic.nack`/`basic.reject` with requeue (and a closed channel's
    returns) count against the delivery limit."""
    consumer_timeout_enforcer: Literal["channel", "queue"]
    """Who acts on a delivery left unacknowledged past `consumer_timeout`: the
    channel on its tick (closing the channel, up to 4.2), or the queue the delivery
    came from (4.3: `rabbit_channel`'s tick no longer looks, a quorum queue's
    machine returns the messages and cancels the consumer)."""
    last_death_headers: bool
    """Whether dead-lettered messages carry `x-last-death-*` headers."""
    default_max_message_size: int
    """`max_message_size` in the release's application defaults (bytes)."""
    frame_min_size: int
    """The smallest `frame_max` a client may negotiate in tune-ok (`?FRAME_MIN_SIZE`:
    4096, raised to 8192 in 4.1)."""
    content_header_size_check: bool
    """Whether the command assembler refuses a content header declaring more than
    512 MiB (501 FRAME_ERROR, from 4.2.9 and 4.3); before, the header is taken and
    only `max_message_size` limits the body."""
    deprecated_features: Mapping[str, Phase]
    """The deprecation phase of each deprecated feature warren models; a feature
    not listed here is permitted (3.10 has no deprecated-feature mechanism)."""
    quorum_queue_arguments: tuple[str, ...] = ()
    """`rabbit_quorum_queue:capabilities()`'s `queue_arguments`: the arguments a
    redeclare compares with the queue's, in this order (the first that differs is
    the one the 406 names)."""
    classic_confirm_after_fsync: bool = False
    """Whether a persistent message in a durable classic queue is confirmed only after
    its message store synced it (3.10's store and queue index), or once the store
    has handed it to the operating system (4.x)."""
    classic_home_down_retries: int = 2000
    """What an operation on a durable classic queue meets when the queue's home node
    is down. 4.x keeps the queue's record live on the other nodes, so
    `rabbit_amqqueue:with/3` tries the operation again this many times, 30 ms
    apart, before `404 NOT_FOUND - failed to perform operation on queue 'q' in
    vhost 'v' due to timeout`, and publishes still route to the queue and are
    nacked. 0 (3.10, whose `on_node_down` drops the record from its live table):
    the queue is absent at once, `404 NOT_FOUND - home node 'N' of durable queue
    'q' in vhost 'v' is down or inaccessible`, and publishes do not route to it."""
    declare_records_queue_type: bool = True
    """Whether a declare without `x-queue-type` stores the queue's type as that
    argument (`rabbit_amqqueue:augment_declare_args` fills in the node's default type
    from 3.11 on), so a redeclare as another type is refused as `received 'quorum'
    but current is 'classic'`; 3.10 fills it in only from a vhost's default queue type,
    and the refusal reads `received the value 'quorum' of type 'longstr' but current
    is none`."""
    unknown_exchange_type_error: str = "PRECONDITION_FAILED"
    """What `rabbit_exchange:check_type` answers an exchange.declare naming an unknown
    type with: 406 PRECONDITION_FAILED in 4.x, 503 COMMAND_INVALID (a connection
    error) in 3.10."""
    dead_letter_key_drops_cc: bool = False
    """Whether a message dead-lettered with a `dead-letter-routing-key` loses its `CC`
    header (3.10's `rabbit_dead_letter:make_msg`); 4.x's message container keeps it."""
    classic_reconsume_on_queue_down: bool = False
    """What a channel does with its consumers of a classic queue whose process died:
    3.10's `rabbit_channel:handle_consuming_queue_down_or_eol` registers each one again
    on the queue (the client is told nothing) unless it was declared with
    `x-cancel-on-ha-failover` or the queue cannot be reached, and cancels it then;
    4.x cancels them all (`basic.cancel` to clients with `consumer_cancel_notify`)."""
    quorum_min_recovery_checkpoint_interval: int = 0
    """`quorum_min_recovery_checkpoint_interval`, the Ra `min_recovery_checkpoint_interval`
    `rabbit_quorum_queue` gives every member: 100000 in 4.3 (a member stopped in order
    saves its state when that many entries were applied since the last one, so it
    restarts without replaying them), 0 before (Ra's default: never)."""

    def recorded(self) -> dict[str, Any]:
        """The record's behaviour fields a recorded run keeps beside its history (its
        `run_meta`), so the analysis judges the run by its own release's rules: the
        scalar fields, without the server identity and the feature phases."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), bool | int | str | None)}

    aliveness_test_declares_queue: bool = False
    """Whether the management API's `GET /api/aliveness-test/<vhost>` declares a transient
    `aliveness-test` queue and sends a message through it (3.10, 4.0.5); from 4.0.6 and
    4.1 `rabbit_mgmt_wm_aliveness_test` is a no-op that only opens a channel on the
    vhost."""

    def permits(self, feature: str) -> bool:
        """Whether a deprecated feature is permitted when the node's config is silent."""
        return self.deprecated_features.get(feature, "permitted_by_default") \
            == "permitted_by_default"


def _phases(phase: Phase) -> Mapping[str, Phase]:
    """The same phase for the three deprecated features warren models: 4.0 to 4.2
    permit them by default, 4.3 denies all three by default (none is removed yet)."""
    return MappingProxyType({feature: phase for feature in
                             ("global_qos", "transient_nonexcl_queues", "queue_master_locator")})


#: `rabbit_quorum_queue:capabilities()`'s `queue_arguments` from 3.10 to 4.2
_QQ_ARGUMENTS = (
    "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
    "x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
    "x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
    "x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl",
    "x-queue-leader-locator")
#: 4.3 appends the consumer timeouts and the delayed-retry arguments
_QQ_ARGUMENTS_4_3 = (*_QQ_ARGUMENTS, "x-consumer-disconnected-timeout", "x-consumer-timeout",
                     "x-delayed-retry-type", "x-delayed-retry-min", "x-delayed-retry-max")

# Erlang of the reference brokers: Debian 12's 3.10.8 runs OTP 25.2.3 and Debian 13's
# 4.0.5 runs OTP 27.3.4.1 (read from a running node). 4.2 and 4.3 are given the
# same Erlang 27 as 4.0.5, a release both support.
_OTP_27 = "Erlang/OTP 27.3.4.1"

RELEASES: Mapping[str, Release] = MappingProxyType({
    "3.10": Release(
        series="3.10",
        server=ServerIdentity("RabbitMQ", "3.10.8", "Erlang/OTP 25.2.3",
                              "Copyright (c) 2007-2022 VMware, Inc. or its affiliates.",
                              _MPL),
        machine_version=2, default_delivery_limit=None,
        delivery_count_header="delivery_count", requeue_counts_toward_limit=True,
        consumer_timeout_enforcer="channel", last_death_headers=False,
        default_max_message_size=134_217_728, frame_min_size=4096,
        content_header_size_check=False,
        deprecated_features=MappingProxyType({}), quorum_queue_arguments=_QQ_ARGUMENTS,
        classic_confirm_after_fsync=True, classic_home_down_retries=0,
        declare_records_queue_type=False, unknown_exchange_type_error="COMMAND_INVALID",
        dead_letter_key_drops_cc=True, classic_reconsume_on_queue_down=True,
        aliveness_test_declares_queue=True),
    "4.0": Release(
        series="4.0",
        server=ServerIdentity("RabbitMQ", "4.0.5", _OTP_27,
                              "Copyright (c) 2007-2024 Broadcom Inc and/or its subsidiaries",
                              _MPL),
        machine_version=5, default_delivery_limit=20,
        delivery_count_header="acquired_count", requeue_counts_toward_limit=True,
        consumer_timeout_enforcer="channel", last_death_headers=True,
        default_max_message_size=16_777_216, frame_min_size=4096,
        content_header_size_check=False,
        deprecated_features=_phases("permitted_by_default"),
        quorum_queue_arguments=_QQ_ARGUMENTS, aliveness_test_declares_queue=True),
    "4.2": Release(
        series="4.2",
        server=ServerIdentity("RabbitMQ", "4.2.9", _OTP_27,
                              "Copyright (c) 2007-2026 Broadcom Inc and/or its subsidiaries",
                              _MPL),
        machine_version=7, default_delivery_limit=20,
        delivery_count_header="acquired_count", requeue_counts_toward_limit=True,
        consumer_timeout_enforcer="channel", last_death_headers=True,
        default_max_message_size=16_777_216, frame_min_size=8192,
        content_header_size_check=True,
        deprecated_features=_phases("permitted_by_default"),
        quorum_queue_arguments=_QQ_ARGUMENTS),
    "4.3": Release(
        series="4.3",
        server=ServerIdentity("RabbitMQ", "4.3.5", _OTP_27,
                              "Copyright (c) 2007-2026 Broadcom Inc and/or its subsidiaries",
                              _MPL),
        machine_version=8, default_delivery_limit=20,
        delivery_count_header="delivery_count", requeue_counts_toward_limit=False,
        consumer_timeout_enforcer="queue", last_death_headers=True,
        default_max_message_size=16_777_216, frame_min_size=8192,
        content_header_size_check=True,
        deprecated_features=_phases("denied_by_default"),
        quorum_queue_arguments=_QQ_ARGUMENTS_4_3,
        quorum_min_recovery_checkpoint_interval=100_000),
})

#: The newest release whose machine version warren builds (rabbit_fifo 7).
DEFAULT_SERIES = "4.3"


class UnknownRelease(ValueError):
    """A `rabbitmq_version` that names no release in the table."""


class UnmodelledRelease(ValueError):
    """A release in the table whose quorum-queue machine version is not built."""


def modelled_series(built_machines: Collection[int]) -> list[str]:
    """The series whose machine version is among `built_machines`, oldest first."""
    return [s for s, r in RELEASES.items() if r.machine_version in built_machines]


def lookup(series: str, built_machines: Collection[int]) -> Release:
    """The record of `series`, refused unless its machine is one of `built_machines`
    (what the fifo package implements): a node must not claim a release whose
    quorum queues it would run with another release's machine."""
    release = RELEASES.get(series)
    if release is None:
        raise UnknownRelease(f"one of {', '.join(RELEASES)}")
    if release.machine_version not in built_machines:
        can = ", ".join(modelled_series(built_machines)) or "none"
        raise UnmodelledRelease(
            f"a RabbitMQ release this warren models ({can}; {series} needs rabbit_fifo "
            f"machine version {release.machine_version}, which is not built yet)")
    return release
