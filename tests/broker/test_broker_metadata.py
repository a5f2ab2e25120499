"""The metadata store machine: commands in, (state, reply, effects) out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from actors.pid import Pid
from broker import policy
from broker.metadata import PROJECTION, MetadataMachine, MetadataState, vhost_metadata
from channel.access.auth import User, password_ok
from channel.access.permissions import Permission
from channel.queue_types.classic.classic_directory import ClassicRecord
from channel.queue_types.queue_registry import QueueRecord

M = MetadataMachine()


class Store:
    """Applies commands with increasing indexes, like a Ra member does."""

    def __init__(self) -> None:
        self.state: MetadataState = M.init({})
        self.index = 0
        self.effects: list[Any] = []

    def apply(self, cmd: Any) -> Any:
        self.index += 1
        self.state, (index, reply), self.effects = M.apply({"index": self.index}, cmd, self.state)
        assert index == self.index
        return reply


def record(name: str, **arguments: Any) -> QueueRecord:
    return QueueRecord("/", name, True, {"x-queue-type": "quorum", **arguments},
                       f"%2F_{name}", (("%2F_" + name, "a@h:1"),))


def qq_policy(name: str, pattern: str, definition: dict[str, Any], priority: int = 0,
              apply_to: str = "queues") -> tuple[str, policy.Policy]:
    return ("set_policy", policy.validate("/", name, pattern, definition, priority, apply_to))


def test_first_boot_has_vhost_slash_and_guest_with_predeclared_exchanges() -> None:
    s = M.init({})
    assert s.vhosts == ("/",)
    assert password_ok(s.users["guest"], "guest")
    assert s.topology.lookup("/", "amq.topic").type == "topic"


def test_every_command_publishes_the_new_state_to_each_nodes_copy() -> None:
    st = Store()
    st.apply(("add_vhost", "v1"))
    assert st.effects == [("send_msg", PROJECTION, ("metadata_state", 1, st.state), ["local"])]
    assert "v1" in st.state.topology.vhosts and st.state.vhosts == ("/", "v1")


def test_exchange_declare_is_copy_on_write() -> None:
    st = Store()
    before = st.state
    assert st.apply(("declare_exchange", "/", "x", "fanout", {"durable": True}, {})) == "ok"
    assert before.topology.lookup("/", "x") is None
    assert st.state.topology.lookup("/", "x").type == "fanout"


def test_exchange_errors_are_rabbitmq_replies_and_leave_state_alone() -> None:
    st = Store()
    st.apply(("declare_exchange", "/", "x", "fanout", {"durable": True}, {}))
    before = st.state
    reply = st.apply(("declare_exchange", "/", "x", "direct", {"durable": True}, {}))
    assert reply == ("error", ("PRECONDITION_FAILED",
                               "inequivalent arg 'type' for exchange 'x' in vhost '/': "
                               "received 'direct' but current is 'fanout'"))
    assert st.state is before
    assert st.apply(("delete_exchange", "/", "amq.direct", False))[1][0] == "ACCESS_REFUSED"
    assert st.apply(("bind", "nope", "x", "queue", "q", "", {})) == \
        ("error", ("NOT_FOUND", "no vhost 'nope'"))


def test_bindings_route_and_go_with_their_queue() -> None:
    st = Store()
    st.apply(("declare_exchange", "/", "x", "direct", {"durable": True}, {}))
    st.apply(("declare_queue", record("q1")))
    st.apply(("bind", "/", "x", "queue", "q1", "k", {}))
    assert st.state.topology.route("/", "x", ["k"], None) == ["q1"]
    reply = st.apply(("delete_queue", "/", "q1"))
    assert reply[0] == "ok" and reply[1].name == "q1"
    assert st.state.topology.route("/", "x", ["k"], None) == []
    assert st.apply(("delete_queue", "/", "q1")) == ("ok", None)


def test_declare_queue_is_created_once_then_existing() -> None:
    st = Store()
    created = st.apply(("declare_queue", record("q1")))
    assert created[0] == "created"
    again = st.apply(("declare_queue", record("q1", **{"x-max-length": 5})))
    assert again == ("existing", created[1])


def test_update_leader_and_members() -> None:
    st = Store()
    st.apply(("declare_queue", record("q1")))
    assert st.apply(("update_leader", "/", "q1", ("%2F_q1", "a@h:1"))) == "ok"
    st.apply(("update_members", "/", "q1", [("%2F_q1", "a@h:1"), ("%2F_q1", "b@h:2")]))
    rec = st.state.queues[("/", "q1")]
    assert rec.leader == ("%2F_q1", "a@h:1") and len(rec.servers) == 2
    assert st.apply(("update_leader", "/", "gone", ("x", "a@h:1"))) == ("error", "not_found")


def test_highest_priority_matching_policy_applies_and_follows_changes() -> None:
    st = Store()
    st.apply(("declare_queue", record("orders.eu")))
    st.apply(("declare_queue", record("audit")))
    st.apply(qq_policy("low", "^orders", {"max-length": 10}, priority=1))
    st.apply(qq_policy("high", "eu", {"max-length": 3}, priority=5))
    assert st.state.queues[("/", "orders.eu")].policy == {"max-length": 3}
    assert st.state.queues[("/", "audit")].policy == {}
    assert st.apply(("clear_policy", "/", "high")) == "ok"
    assert st.state.queues[("/", "orders.eu")].policy == {"max-length": 10}
    assert st.apply(("clear_policy", "/", "high")) == ("error", "not_found")


def test_policy_change_asks_the_leader_to_reconfigure_changed_queues_only() -> None:
    st = Store()
    st.apply(("declare_queue", record("a1")))
    st.apply(("declare_queue", record("b1")))
    st.apply(qq_policy("p", "^a", {"delivery-limit": 2}))
    (mod_call,) = [e for e in st.effects if e[0] == "mod_call"]
    assert mod_call[1:3] == ("broker.hooks", "policy_changed")
    assert [r.name for r in mod_call[3][0]] == ["a1"]
    st.apply(qq_policy("p", "^a", {"delivery-limit": 2}))  # same definition: nothing to do
    assert [e for e in st.effects if e[0] == "mod_call"] == []


def test_new_queue_picks_up_the_policy_in_force() -> None:
    st = Store()
    st.apply(qq_policy("ttl", ".*", {"message-ttl": 1000}, apply_to="quorum_queues"))
    assert st.apply(("declare_queue", record("q")))[1].policy == {"message-ttl": 1000}


def test_exchange_only_policy_does_not_apply_to_queues() -> None:
    st = Store()
    st.apply(qq_policy("x", ".*", {"max-length": 1}, apply_to="exchanges"))
    assert st.apply(("declare_queue", record("q")))[1].policy == {}


def test_users() -> None:
    st = Store()
    st.apply(("add_user", User("bob", "pw")))
    assert set(st.state.users) == {"guest", "bob"}
    assert st.apply(("delete_user", "bob")) == "ok"
    assert st.apply(("delete_user", "bob")) == ("error", "no_such_user")


@pytest.mark.parametrize(("key", "arg", "pol", "expected"), [
    ("max-length", 10, 3, 3),
    ("max-length", None, 3, 3),
    ("message-ttl", 100, 5000, 100),
    ("expires", None, None, None),
    ("overflow", "drop-head", "reject-publish", "reject-publish"),
    ("overflow", "reject-publish", None, "reject-publish"),
    ("dead-letter-exchange", "arg-dlx", "pol-dlx", "arg-dlx"),
    ("dead-letter-exchange", None, "pol-dlx", "pol-dlx"),
    ("delivery-limit", None, None, None),  # the release's default is machine_config's
    ("delivery-limit", 5, 10, 5),
    ("delivery-limit", -1, 10, 10),
    ("delivery-limit", None, -1, -1),
])
def test_argument_versus_policy(key: str, arg: Any, pol: Any, expected: Any) -> None:
    args = {} if arg is None else {"x-" + key: arg}
    definition = {} if pol is None else {key: pol}
    assert policy.effective(key, args, definition) == expected


def test_priority_ties_go_to_the_first_name() -> None:
    ps = [policy.validate("/", n, ".*", {"max-length": i}) for i, n in enumerate("ba")]
    assert policy.matching_policy(ps, "/", "queue", "q").name == "a"


def classic(name: str, node: str = "a@h:1", serial: int = 1, *, durable: bool = True,
            vhost: str = "/") -> ClassicRecord:
    return ClassicRecord(vhost, name, Pid(node, serial, 1), durable, False, None,
                         {"x-queue-type": "classic"})


def test_a_classic_queue_record_is_the_clusters_and_its_name_is_taken_once() -> None:
    st = Store()
    first = classic("c")
    assert st.apply(("declare_classic_queue", first)) == ("created", first)
    assert st.apply(("declare_classic_queue", classic("c", serial=2))) == ("existing", first)
    st.apply(("declare_queue", record("q")))
    assert st.apply(("declare_classic_queue", classic("q"))) == (
        "error", ("PRECONDITION_FAILED", "inequivalent arg 'x-queue-type' for queue 'q' in "
                  "vhost '/': received 'classic' but current is 'quorum'"))


def test_a_classic_record_goes_only_with_the_process_it_names_and_takes_its_bindings(
        ) -> None:
    st = Store()
    st.apply(("declare_classic_queue", classic("c")))
    st.apply(("bind", "/", "amq.direct", "queue", "c", "k", {}))
    assert st.apply(("delete_classic_queue", "/", "c", Pid("a@h:1", 9, 1))) == ("ok", 0)
    assert ("/", "c") in st.state.classic_queues
    assert st.apply(("delete_classic_queue", "/", "c", Pid("a@h:1", 1, 1))) == ("ok", 1)
    assert st.state.classic_queues == {}
    assert st.state.topology.bindings("/", "amq.direct") == []


def test_a_down_node_loses_its_transient_classic_queues_and_keeps_its_durable_ones() -> None:
    st = Store()
    for r in (classic("t", durable=False), classic("d"), classic("elsewhere", "b@h:2",
                                                                 durable=False)):
        st.apply(("declare_classic_queue", r))
    st.apply(("classic_node_down", "a@h:1"))
    assert sorted(n for _v, n in st.state.classic_queues) == ["d", "elsewhere"]


def test_add_vhost_keeps_its_metadata_and_delete_vhost_takes_everything_in_it() -> None:
    st = Store()
    st.apply(("add_vhost", "v", {"default_queue_type": "quorum"}))
    st.apply(("add_vhost", "v", {"default_queue_type": "classic"}))  # exists: unchanged
    assert vhost_metadata(st.state, "v") == {"default_queue_type": "quorum"}
    st.apply(("set_permissions", "guest", "v", Permission(".*", ".*", ".*")))
    st.apply(("declare_classic_queue", classic("c", vhost="v")))
    st.apply(("declare_queue", replace(record("q"), vhost="v")))
    st.apply(("set_vhost_limits", "v", {"max-queues": 5}))
    assert st.apply(("delete_vhost", "v")) == "ok"
    s = st.state
    assert s.vhosts == ("/",) and "v" not in s.topology.vhosts
    assert (s.classic_queues, s.queues, s.vhost_limits) == ({}, {}, {})
    assert vhost_metadata(s, "v") == {}
    assert "v" not in s.users["guest"].permissions
    assert st.apply(("delete_vhost", "v")) == ("error", ("NOT_FOUND", "no vhost 'v'"))
