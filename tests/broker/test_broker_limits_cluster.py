"""Vhost and user limits on two real node processes: a limit set with `warren ctl` on one
node holds on the other, and connections are counted across the cluster (as
`rabbit_connection_tracking` counts them); plus rabbitmqctl's limit commands and their
validation errors."""

from __future__ import annotations

from collections.abc import Iterator

import pika.exceptions as pex
import pytest

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    ctl_json,
    eventually,
    running_cluster,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("limits"), 2, backend="memory") as nodes:
        yield nodes



def refusal(b: BrokerProc, user: str = "guest", password: str = "guest") -> str:
    with pytest.raises(pex.ProbableAccessDeniedError) as info:
        connect(b, user, password)
    return str(info.value.args[0])


def ok(node: str, *args: str) -> str:
    out = ctl(node, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_vhost_connection_limit_set_on_one_node_is_enforced_on_another(
        cluster: list[BrokerProc]) -> None:
    n1, n2 = cluster
    ok(n1.name, "set_vhost_limits", '{"max-connections": 1}')
    assert ok(n2.name, "list_vhost_limits") == '{"max-connections":1}'
    first = connect(n1)
    try:
        assert refusal(n2) == (
            "ConnectionClosedByBroker: (530) \"NOT_ALLOWED - access to vhost '/' refused "
            "for user 'guest': connection limit (1) is reached\"")
    finally:
        first.close()

    def admitted() -> bool:
        try:
            connect(n2).close()
            return True
        except pex.ProbableAccessDeniedError:
            return False  # n1 has not yet seen the first connection's socket go
    assert eventually(admitted), "the freed slot was never usable on the other node"
    ok(n2.name, "clear_vhost_limits")
    assert ok(n1.name, "list_vhost_limits") == ""
    assert ctl(n1.name, "clear_vhost_limits").stderr == "Error:\nParameter does not exist\n"


def test_user_limits_and_the_limit_commands(cluster: list[BrokerProc]) -> None:
    n1, n2 = cluster
    ok(n1.name, "add_user", "bob", "pw")
    ok(n1.name, "set_permissions", "bob", ".*", ".*", ".*")
    ok(n2.name, "set_user_limits", "bob", '{"max-connections": 1}')
    ok(n2.name, "set_user_limits", "bob", '{"max-channels": 3}')  # merged
    assert ok(n1.name, "list_user_limits", "--user", "bob") == (
        '{"max-channels":3,"max-connections":1}')
    assert ctl_json(n1.name, "list_user_limits", "--global") == [
        {"user": "bob", "limits": '{"max-channels":3,"max-connections":1}'}]
    assert ok(n1.name, "list_user_limits") == "{}"  # guest's: none
    conn = connect(n2, "bob", "pw")
    try:
        assert refusal(n1, "bob", "pw") == (
            "ConnectionClosedByBroker: (530) \"NOT_ALLOWED - connection refused for user "
            "'bob': user connection limit (1) is reached\"")
    finally:
        conn.close()
    ok(n1.name, "clear_user_limits", "bob", "max-connections")
    assert ok(n2.name, "list_user_limits", "--user", "bob") == '{"max-channels":3}'
    ok(n1.name, "clear_user_limits", "bob", "all")
    assert ctl_json(n2.name, "list_user_limits", "--global") == []

    ok(n1.name, "set_vhost_limits", "-p", "/", '{"max-queues": 5, "max-connections": -1}')
    assert ctl_json(n2.name, "list_vhost_limits", "--global") == [
        {"vhost": "/", "limits": '{"max-connections":-1,"max-queues":5}'}]
    ok(n2.name, "clear_vhost_limits")

    for args, code, message in [
        (("set_vhost_limits", '{"max-foo": 1}'), 65,
         'Validation failed\n\nUnrecognised terms [{<<"max-foo">>,1}] in limits'),
        (("set_vhost_limits", '{"max-queues": "5"}'), 65,
         'Validation failed\n\nmax-queues should be a number, actually was <<"5">>'),
        (("set_vhost_limits", "-p", "nope", '{"max-queues": 5}'), 65,
         "Virtual host 'nope' does not exist"),
        (("set_user_limits", "bob", '{"max-queues": 5}'), 65,
         'Unrecognised terms [{<<"max-queues">>,5}] in user-limits'),
        (("set_user_limits", "bob", '{"max-channels": 2.5}'), 65,
         "max-channels should be a number, actually was 2.5"),
        (("set_user_limits", "nobody", '{"max-channels": 2}'), 65,
         'User "nobody" does not exist'),
        (("list_user_limits", "--user", "nobody"), 65, 'User "nobody" does not exist'),
    ]:
        out = ctl(n1.name, *args)
        assert (out.returncode, out.stderr) == (code, f"Error:\n{message}\n"), args
