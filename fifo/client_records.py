"""State records of the ``rabbit_fifo_client`` session.

One `ClientState` exists per (channel/session process, quorum queue). It is a
plain value: every operation in `fifo.client` copies it before changing
anything, so a caller can keep an old state around (for a trace, a retry or a
property test) without it being altered behind its back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.wire import frozen_init
from releases import DEFAULT_SERIES, RELEASES

__all__ = [
    "CACHE_SEG_TIMEOUT",
    "COMMAND_TIMEOUT",
    "SOFT_LIMIT",
    "TIMER_TIME",
    "UNLIMITED_PREFETCH_COUNT",
    "ClientCfg",
    "ClientConsumer",
    "ClientState",
    "cluster_name",
    "copy_state",
    "init",
    "pick_server",
    "sorted_servers",
]

#: ``quorum_commands_soft_limit``: pending commands above which the session is slow.
SOFT_LIMIT = 32
#: The slow-state timer: when it fires the session looks for a leader and resends.
TIMER_TIME = 10_000
#: the machine a session speaks to unless told (the channel passes its node's
#: release's): the default release's
DEFAULT_MACHINE_VERSION = RELEASES[DEFAULT_SERIES].machine_version
#: Timeout of the synchronous administrative calls (purge, update_config).
COMMAND_TIMEOUT = 30_000
#: Prefetch 0 means "unlimited"; the machine needs a number, so a large one is used.
UNLIMITED_PREFETCH_COUNT = 2000
#: How long segment files opened to resolve read plans stay cached.
CACHE_SEG_TIMEOUT = 5000


@dataclass(frozen=True, slots=True)
class ClientCfg:
    """``#cfg{}`` plus what a pure client cannot ask the runtime for.

    ``self_pid`` stands for upstream ``self()`` (consumer ids, the enqueuer pid)
    and ``node`` for ``node()`` (finding a local member to read from).
    ``machine_version`` selects the wire protocol: clients talking to a v7
    machine route returns through the leader's aux handler (docs/fifo.md, returned messages).
    ``delivery_count_header`` is the header counter a delivery's ``x-delivery-count``
    carries, as the client code of the node's release projects it: every earlier
    delivery (``acquired_count``, 4.0 to 4.2) or failed deliveries only
    (``delivery_count``, 4.3, with ``x-acquired-count`` beside it).
    """

    servers: tuple[Any, ...]
    self_pid: Any
    node: Any = None
    soft_limit: int = SOFT_LIMIT
    timeout: int = 65_000
    machine_version: int = DEFAULT_MACHINE_VERSION
    delivery_count_header: str = "acquired_count"


@frozen_init
@dataclass(frozen=True, slots=True)
class ClientConsumer:
    """``#consumer{}``: what the session must remember about one of its consumers.

    ``last_msg_id`` is ``None`` (upstream ``undefined``) when the consumer was
    re-attached while messages were still checked out to it: the next delivery
    cannot be checked for gaps, so it is accepted whatever its id.
    """

    key: Any
    last_msg_id: int | None
    ack: bool = True


@dataclass(slots=True)
class ClientState:
    """``#state{}`` of ``rabbit_fifo_client`` with upstream field names.

    ``pending`` maps every pipelined correlation (``next_seq``) to
    ``(Correlation | None, Command)`` until the leader reports it applied;
    ``unsent_commands`` holds settlements stashed while ``slow``, per consumer
    key, as ``(settles, returns, discards)``. ``timer_state`` is ``"slow"`` while
    the slow-state timer is armed.
    """

    cfg: ClientCfg
    leader: Any = None
    queue_status: str | None = None
    next_seq: int = 0
    next_enqueue_seq: int = 1
    slow: bool = False
    unsent_commands: dict[Any, tuple[list[int], list[int], list[int]]] = field(
        default_factory=dict)
    pending: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    consumers: dict[Any, ClientConsumer] = field(default_factory=dict)
    timer_state: str | None = None
    cached_segments: Any = None


def init(servers: Sequence[Any], self_pid: Any, *, soft_limit: int = SOFT_LIMIT,
         net_ticktime: int = 60, machine_version: int = DEFAULT_MACHINE_VERSION,
         node: Any = None, delivery_count_header: str = "acquired_count") -> ClientState:
    """A fresh session; `servers` should list the known leader first.

    The call timeout is ``(net_ticktime + 5) s`` so that a call to a member on a
    partitioned node fails only after the distribution layer has noticed.
    """
    if node is None:
        node = getattr(self_pid, "node", None)
    return ClientState(cfg=ClientCfg(servers=tuple(servers), self_pid=self_pid, node=node,
                                     soft_limit=soft_limit,
                                     timeout=(net_ticktime + 5) * 1000,
                                     machine_version=machine_version,
                                     delivery_count_header=delivery_count_header))


def copy_state(s: ClientState) -> ClientState:
    """A copy whose maps can be changed without touching `s`.

    Built field by field rather than with `dataclasses.replace`, which looks the
    fields up again on every call: this runs once per operation, so once per
    publish and per settlement.
    """
    unsent = s.unsent_commands
    return ClientState(
        s.cfg, s.leader, s.queue_status, s.next_seq, s.next_enqueue_seq, s.slow,
        {k: (list(a), list(b), list(c)) for k, (a, b, c) in unsent.items()} if unsent else {},
        dict(s.pending), dict(s.consumers), s.timer_state, s.cached_segments)


def pick_server(s: ClientState) -> Any:
    """Where pipelined commands go: the known leader, else the first server."""
    return s.cfg.servers[0] if s.leader is None else s.leader


def sorted_servers(s: ClientState) -> tuple[Any, ...]:
    """Servers to try for a synchronous call, the known leader first."""
    if s.leader is None:
        return s.cfg.servers
    return (s.leader, *(x for x in s.cfg.servers if x != s.leader))


def cluster_name(s: ClientState) -> Any:
    """The Ra cluster name, carried by the ``block``/``unblock`` flow actions."""
    first = s.cfg.servers[0]
    return first[0] if isinstance(first, tuple) else first
