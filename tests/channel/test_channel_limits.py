"""The limit logic of `channel.limits.limits`: what a limit value means, what is counted, the
order of the checks and RabbitMQ's texts (
`rabbit_reader`, `rabbit_vhost_limit`, `rabbit_auth_backend_internal`,
`rabbit_queue_type:check_queue_limits`, `rabbit_parameter_validation`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from channel.access.auth import User
from channel.connection.config import Config
from channel.errors import AmqpError
from channel.limits.limits import (
    USER_LIMITS,
    VHOST_LIMITS,
    channel_refusal,
    check_queue_limits,
    connection_refusal,
    effective_limit,
    local_count,
    validate_limits,
)
from channel.queue_types.queue_registry import QueueRecord
from channel.queue_types.quorum.quorum_queue import QuorumBackend
from releases import DEFAULT_SERIES, RELEASES


@dataclass
class FakeReader:
    """What the counts look at on a reader: its vhost (set once opened), user, channels."""

    user: User | None
    vhost: str = ""
    channels: dict[int, Any] = field(default_factory=dict)


def reader(user: str, vhost: str = "/", channels: int = 0) -> FakeReader:
    return FakeReader(User(user, "pw"), vhost, dict.fromkeys(range(1, channels + 1)))


@pytest.mark.parametrize(("limits", "expected"), [
    ({}, None),
    ({"max-connections": 5}, 5),
    ({"max-connections": 0}, 0),
    ({"max-connections": -1}, None),      # negative: no limit
    ({"max-connections": 2.5}, None),     # not an integer: ignored
    ({"max-connections": True}, None),    # JSON true is not an integer
    ({"max-queues": 3}, None),            # another key
])
def test_effective_limit(limits: dict[str, Any], expected: int | None) -> None:
    assert effective_limit(limits, "max-connections") == expected


def test_counts_cover_opened_connections_only() -> None:
    readers = [reader("a", "/", 2), reader("a", "v", 1), reader("b", "/", 3),
               FakeReader(User("a", "pw")),   # still in the handshake: no vhost yet
               FakeReader(None)]              # before start-ok
    assert local_count(readers, "vhost_connections", "/") == 2
    assert local_count(readers, "vhost_connections", "v") == 1
    assert local_count(readers, "user_connections", "a") == 2
    assert local_count(readers, "user_channels", "a") == 3
    assert local_count(readers, "user_channels", "nobody") == 0


def refusal(**overrides: Any) -> AmqpError | None:
    args: dict[str, Any] = {"connection_max": None, "active_connections": 1, "vhost": "/",
                            "vhost_limits": {}, "user": "a", "user_limits": {},
                            "readers": [], "peer_count": None}
    args.update(overrides)
    return connection_refusal(**args)


def test_no_limits_admit_and_are_not_counted() -> None:
    def never(_kind: str, _key: str) -> int:
        raise AssertionError("counted without a limit")
    assert refusal(readers=[reader("a")] * 100, peer_count=never) is None


def test_node_connection_limit_counts_the_new_connection_too() -> None:
    assert refusal(connection_max=2, active_connections=2) is None
    error = refusal(connection_max=2, active_connections=3)
    assert error is not None
    assert (error.code, error.reply_text, error.method) == (
        530, "NOT_ALLOWED - connection refused: node connection limit (2) is reached", (10, 40))
    assert refusal(connection_max=0).reply_text.endswith("node connection limit (0) is reached")


def test_vhost_connection_limit_counts_this_node_and_the_peers() -> None:
    asked: list[tuple[str, str]] = []

    def peers(kind: str, key: str) -> int:
        asked.append((kind, key))
        return 1
    limits = {"max-connections": 3}
    assert refusal(vhost_limits=limits, readers=[reader("b")], peer_count=peers) is None
    error = refusal(vhost_limits=limits, readers=[reader("b"), reader("c", "v"),
                                                  reader("c")], peer_count=peers)
    assert error is not None and (error.code, error.reply_text, error.method) == (
        530, "NOT_ALLOWED - access to vhost '/' refused for user 'a': connection limit (3) "
             "is reached", (10, 40))
    assert asked == [("vhost_connections", "/")] * 2


def test_vhost_limit_zero_refuses_without_counting_and_negative_admits() -> None:
    error = refusal(vhost_limits={"max-connections": 0})
    assert error is not None and error.reply_text.endswith("connection limit (0) is reached")
    assert refusal(vhost_limits={"max-connections": -1}, readers=[reader("a")] * 9) is None


def test_user_connection_limit_counts_every_vhost() -> None:
    readers = [reader("a", "/"), reader("a", "v"), reader("b", "/")]
    assert refusal(user_limits={"max-connections": 3}, readers=readers) is None
    error = refusal(user_limits={"max-connections": 2}, readers=readers)
    assert error is not None and (error.code, error.reply_text, error.method) == (
        530, "NOT_ALLOWED - connection refused for user 'a': user connection limit (2) is "
             "reached", (10, 40))


def test_connection_checks_go_node_then_vhost_then_user() -> None:
    full = {"max-connections": 0}
    node_first = refusal(connection_max=0, vhost_limits=full, user_limits=full)
    vhost_next = refusal(vhost_limits=full, user_limits=full)
    assert node_first is not None and "node connection limit" in node_first.reply_text
    assert vhost_next is not None and "access to vhost" in vhost_next.reply_text


def channel_check(**overrides: Any) -> AmqpError | None:
    args: dict[str, Any] = {"user": "a", "user_limits": {}, "channel_max_per_node": None,
                            "node": "n1@127.0.0.1:1", "readers": [], "peer_count": None}
    args.update(overrides)
    return channel_refusal(**args)


def test_user_channel_limit_counts_all_the_users_connections_and_peers() -> None:
    readers = [reader("a", "/", 1), reader("a", "v", 1), reader("b", "/", 5)]
    assert channel_check(user_limits={"max-channels": 3}, readers=readers) is None
    error = channel_check(user_limits={"max-channels": 3}, readers=readers,
                          peer_count=lambda kind, key: 1 if kind == "user_channels" else 0)
    assert error is not None and (error.code, error.reply_text, error.method) == (
        530, "NOT_ALLOWED - number of channels opened for user 'a' has reached the maximum "
             "allowed user limit of 3", (0, 0))
    zero = channel_check(user_limits={"max-channels": 0})
    assert zero is not None and zero.reply_text.endswith("user limit of 0")


def test_node_channel_limit_counts_every_channel_of_the_node() -> None:
    readers = [reader("a", "/", 1), reader("b", "/", 2)]
    assert channel_check(channel_max_per_node=4, readers=readers) is None
    error = channel_check(channel_max_per_node=3, readers=readers)
    assert error is not None and (error.code, error.reply_text) == (
        530, "NOT_ALLOWED - number of channels opened on node 'n1@127.0.0.1:1' has reached "
             "the maximum allowed limit of 3")
    both = channel_check(channel_max_per_node=3, readers=readers,
                         user_limits={"max-channels": 1})
    assert both is not None and "for user 'a'" in both.reply_text  # the user's limit first


def queue_check(vhost_limits: dict[str, Any], cluster: int | None,
                counts: dict[str | None, int]) -> None:
    check_queue_limits("q", "v", vhost_limits, cluster, lambda vhost: counts[vhost])


def test_queue_limits() -> None:
    queue_check({"max-queues": 3}, 10, {"v": 2, None: 9})
    with pytest.raises(AmqpError) as info:
        queue_check({"max-queues": 3}, None, {"v": 3})
    assert (info.value.code, info.value.reply_text) == (
        406, "PRECONDITION_FAILED - cannot declare queue 'q': queue limit in vhost 'v' (3) "
             "is reached")
    with pytest.raises(AmqpError) as info:
        queue_check({"max-queues": 0}, None, {})
    assert info.value.reply_text.endswith("queue limit in vhost 'v' (0) is reached")
    with pytest.raises(AmqpError) as info:
        queue_check({"max-queues": -1}, 10, {None: 10})
    assert (info.value.code, info.value.reply_text) == (
        406, "PRECONDITION_FAILED - cannot declare queue 'q': queue limit in cluster (10) "
             "is reached")
    with pytest.raises(AmqpError) as info:   # the vhost's limit is checked first
        queue_check({"max-queues": 1}, 1, {"v": 1, None: 1})
    assert "in vhost 'v'" in info.value.reply_text


@pytest.mark.parametrize(("definition", "keys", "name", "errors"), [
    ({"max-connections": 10, "max-queues": 5}, VHOST_LIMITS, "limits", []),
    ({"max-connections": -1}, VHOST_LIMITS, "limits", []),
    ({}, VHOST_LIMITS, "limits", []),
    ({"max-connections": "x"}, VHOST_LIMITS, "limits",
     ['max-connections should be a number, actually was <<"x">>']),
    ({"max-connections": 1.5, "max-queues": True}, VHOST_LIMITS, "limits",
     ["max-queues should be a number, actually was true",
      "max-connections should be a number, actually was 1.5"]),
    ({"max-foo": 1, "max-channels": [1, None]}, VHOST_LIMITS, "limits",
     ['Unrecognised terms [{<<"max-channels">>,[1,null]},{<<"max-foo">>,1}] in limits']),
    ({"max-channels": {"a": "b"}, "max-queues": 1}, USER_LIMITS, "user-limits",
     ['Unrecognised terms [{<<"max-queues">>,1}] in user-limits',
      'max-channels should be a number, actually was #{<<"a">> => <<"b">>}']),
    ([1], USER_LIMITS, "user-limits", ["user-limits not a list [1]"]),
])
def test_validation_texts(definition: Any, keys: tuple[str, ...], name: str,
                          errors: list[str]) -> None:
    assert validate_limits(definition, keys, name) == errors


class FullRegistry:
    """A queue registry holding two quorum queues of `/`; creating one is a test failure."""

    release = RELEASES[DEFAULT_SERIES]

    def __init__(self) -> None:
        self.records = [QueueRecord("/", n, True, {"x-queue-type": "quorum"}, f"%2F_{n}", ())
                        for n in ("a", "b")]

    def lookup(self, vhost: str, name: str) -> QueueRecord | None:
        return next((r for r in self.records if (r.vhost, r.name) == (vhost, name)), None)

    def list(self, vhost: str | None = None) -> list[QueueRecord]:
        return [r for r in self.records if vhost is None or r.vhost == vhost]

    def declare(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a queue was created past its limit")


def qq_declare(name: str, *, auto_delete: bool = False, **args: Any) -> str:
    backend = QuorumBackend(None, FullRegistry())  # type: ignore[arg-type]
    backend.queue_limits = lambda vhost, queue, count: check_queue_limits(
        queue, vhost, {"max-queues": 2}, None, count)
    session = backend.session(None, "/", None, "guest")
    with pytest.raises(AmqpError) as info:
        session.declare(name, passive=False, durable=True, exclusive=False,
                        auto_delete=auto_delete, arguments={"x-queue-type": "quorum", **args})
    return info.value.reply_text


def test_quorum_declare_checks_the_limit_between_arguments_and_properties() -> None:
    """Step 10 of queue.declare: after argument validation (8), before the quorum
    queue's property checks (11)."""
    limit = "PRECONDITION_FAILED - cannot declare queue 'c': queue limit in vhost '/' (2) " \
            "is reached"
    assert qq_declare("c") == limit
    assert qq_declare("c", auto_delete=True) == limit
    assert "invalid arg 'x-max-length'" in qq_declare("c", **{"x-max-length": "ten"})
    assert qq_declare("a", auto_delete=True).startswith(  # an existing queue is not new
        "PRECONDITION_FAILED - inequivalent arg 'auto_delete'")


def test_node_limit_config_keys() -> None:
    config = Config(connection_max="infinity", channel_max_per_node=5,  # type: ignore[arg-type]
                    cluster_queue_limit=None)
    assert (config.connection_max, config.channel_max_per_node,
            config.cluster_queue_limit) == (None, 5, None)
    assert Config(connection_max=0).connection_max == 0  # refuses every connection
    for bad in ({"channel_max_per_node": 0}, {"cluster_queue_limit": -1},
                {"connection_max": "10"}, {"connection_max": 1.5}):
        with pytest.raises(ValueError, match="or 'infinity'"):
            Config(**bad)


def test_a_user_pickled_before_limits_and_topic_permissions_existed_loads_with_defaults() -> None:
    """The metadata store's log and snapshots outlive an upgrade of warren."""
    import pickle

    from channel.access.auth import User
    from channel.access.permissions import ALL

    user = User("old", "pw", {"/": ALL}, ("administrator",), {"max-connections": 2})
    assert pickle.loads(pickle.dumps(user)) == user
    older = User.__new__(User)
    older.__setstate__(user.__getstate__()[:4])  # what a four-field User pickled
    assert (older.name, older.tags, older.limits, older.topic_permissions) == (
        "old", ("administrator",), {}, {})
