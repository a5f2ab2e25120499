"""Topic permissions in the metadata store and through `warren ctl`
(`set_topic_permissions`, `clear_topic_permissions`, `list_topic_permissions`,
`list_user_topic_permissions`; `rabbit_auth_backend_internal`)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from broker import ctl as ctl_cli
from channel.access.auth import User
from channel.access.permissions import ALL
from channel.access.topic_permissions import TopicPermission
from tests.broker import store_support
from tests.broker.broker_support import BrokerProc, ctl, ctl_json, running_cluster


class Store(store_support.Store):
    def topic(self, user: str) -> dict[str, dict[str, TopicPermission]]:
        return {vh: dict(per) for vh, per in self.state.users[user].topic_permissions.items()}


P1, P2 = TopicPermission("^a", "^b"), TopicPermission("", ".*")


def store_with_bob() -> Store:
    st = Store()
    st.apply(("add_vhost", "v"))
    st.apply(("add_user", User("bob", "pw", {"/": ALL})))
    return st


def test_set_replaces_per_vhost_and_exchange() -> None:
    st = store_with_bob()
    assert st.apply(("set_topic_permissions", "bob", "/", "t", P1)) == "ok"
    assert st.apply(("set_topic_permissions", "bob", "/", "u", P1)) == "ok"
    assert st.apply(("set_topic_permissions", "bob", "v", "t", P1)) == "ok"
    assert st.apply(("set_topic_permissions", "bob", "/", "t", P2)) == "ok"
    assert st.topic("bob") == {"/": {"t": P2, "u": P1}, "v": {"t": P1}}
    assert dict(st.state.users["bob"].permissions) == {"/": ALL}


def test_set_refuses_an_unknown_user_before_an_unknown_vhost() -> None:
    st = store_with_bob()
    assert st.apply(("set_topic_permissions", "nobody", "nope", "t", P1)) == (
        "error", "no_such_user")
    assert st.apply(("set_topic_permissions", "bob", "nope", "t", P1)) == (
        "error", ("NOT_FOUND", "no vhost 'nope'"))
    assert st.topic("bob") == {}


def test_clear_one_exchange_or_the_whole_vhost() -> None:
    st = store_with_bob()
    for vhost, exchange in (("/", "t"), ("/", "u"), ("v", "t")):
        st.apply(("set_topic_permissions", "bob", vhost, exchange, P1))
    assert st.apply(("clear_topic_permissions", "bob", "/", "t")) == "ok"
    assert st.topic("bob") == {"/": {"u": P1}, "v": {"t": P1}}
    assert st.apply(("clear_topic_permissions", "bob", "/", "u")) == "ok"
    assert st.topic("bob") == {"v": {"t": P1}}
    st.apply(("set_topic_permissions", "bob", "/", "t", P1))
    assert st.apply(("clear_topic_permissions", "bob", "v", None)) == "ok"
    assert st.topic("bob") == {"/": {"t": P1}}


def test_clearing_what_is_not_there_is_ok() -> None:
    st = store_with_bob()
    before = st.state.users
    assert st.apply(("clear_topic_permissions", "bob", "/", "t")) == "ok"
    assert st.apply(("clear_topic_permissions", "nobody", "/", None)) == "ok"
    assert st.state.users == before


def test_clearing_permissions_keeps_topic_permissions_and_deleting_the_user_drops_them(
        ) -> None:
    st = store_with_bob()
    st.apply(("set_topic_permissions", "bob", "/", "t", P1))
    st.apply(("clear_permissions", "bob", "/"))
    assert st.topic("bob") == {"/": {"t": P1}}
    st.apply(("delete_user", "bob"))
    st.apply(("add_user", User("bob", "pw")))
    assert st.topic("bob") == {}


def parse(*argv: str) -> tuple[str, tuple[Any, ...]]:
    parser = argparse.ArgumentParser()
    ctl_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ctl", "--node", "n@h:1", *argv])
    fun_name, get_args = ctl_cli.COMMANDS[args.ctl_command]
    return fun_name, get_args(args)


def test_cli_argument_shapes() -> None:
    assert parse("set_topic_permissions", "u", "amq.topic", "^a", "") == (
        "set_topic_permissions", ("/", "u", "amq.topic", "^a", ""))
    assert parse("set_topic_permissions", "-p", "v", "u", "x", "w", "r") == (
        "set_topic_permissions", ("v", "u", "x", "w", "r"))
    assert parse("-p", "v", "clear_topic_permissions", "u") == (
        "clear_topic_permissions", ("v", "u", None))
    assert parse("clear_topic_permissions", "u", "x") == (
        "clear_topic_permissions", ("/", "u", "x"))
    assert parse("list_topic_permissions", "-p", "v") == ("list_topic_permissions", ("v",))
    assert parse("list_user_topic_permissions", "u") == ("list_user_topic_permissions", ("u",))


# ------------------------------------------------------------- a real cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("topic_perms"), 3, backend="memory") as nodes:
        yield nodes


def ok(node: str, *args: str) -> str:
    out = ctl(node, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_topic_permissions_set_on_one_node_hold_on_another(cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = (b.name for b in cluster)
    ok(n1, "add_user", "carol", "secret")
    ok(n1, "set_permissions", "carol", ".*", ".*", ".*")
    ok(n2, "set_topic_permissions", "carol", "amq.topic", "^carol\\.", "^{username}\\.")
    ok(n2, "set_topic_permissions", "carol", "other", "", "")
    rows = [{"user": "carol", "exchange": "amq.topic", "write": "^carol\\.",
             "read": "^{username}\\."},
            {"user": "carol", "exchange": "other", "write": "", "read": ""}]
    assert [r for r in ctl_json(n3, "list_topic_permissions") if r["user"] == "carol"] == rows
    assert ctl_json(n1, "list_user_topic_permissions", "carol") == [
        {"vhost": "/", **{k: v for k, v in row.items() if k != "user"}} for row in rows]
    assert ok(n1, "list_user_topic_permissions", "carol").splitlines()[0] == \
        "vhost\texchange\twrite\tread"

    b3 = cluster[2]
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b3.amqp_port, credentials=pika.PlainCredentials("carol", "secret")))
    try:
        ch = conn.channel()
        ch.basic_publish("amq.topic", "carol.news", b"m")
        ch.exchange_declare("amq.topic", passive=True)
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            ch.basic_publish("amq.topic", "dave.news", b"m")
            ch.exchange_declare("amq.topic", passive=True)
        assert (info.value.reply_code, info.value.reply_text) == (
            403, "ACCESS_REFUSED - write access to topic 'dave.news' in exchange 'amq.topic' "
                 "in vhost '/' refused for user 'carol'")
        ok(n1, "clear_topic_permissions", "carol", "amq.topic")
        ch = conn.channel()
        ch.basic_publish("amq.topic", "dave.news", b"m")
        ch.exchange_declare("amq.topic", passive=True)
    finally:
        conn.close()
    assert [r["exchange"] for r in ctl_json(n3, "list_user_topic_permissions", "carol")] == [
        "other"]
    ok(n3, "clear_topic_permissions", "carol")
    assert ctl_json(n2, "list_user_topic_permissions", "carol") == []
    ok(n2, "delete_user", "carol")


def test_topic_permission_command_errors(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    regexp = ctl(n1, "set_topic_permissions", "nobody", "amq.topic", "^a", "[")
    assert regexp.returncode == 65 and 'invalid regular expression "["' in regexp.stderr
    nobody = ctl(n1, "-p", "nope", "set_topic_permissions", "nobody", "amq.topic", "", "")
    assert nobody.returncode == 65 and 'User "nobody" does not exist' in nobody.stderr
    vhost = ctl(n1, "set_topic_permissions", "-p", "nope", "guest", "amq.topic", "", "")
    assert (vhost.returncode, vhost.stderr) == (69, "Error:\nVirtual host nope does not exist\n")
    listing = ctl(n1, "list_user_topic_permissions", "nobody")
    assert listing.returncode == 65 and 'User "nobody" does not exist' in listing.stderr
    assert ctl(n1, "clear_topic_permissions", "nobody").returncode == 0
