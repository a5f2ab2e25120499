"""Who executes which effect, including the `local` rule table."""

from __future__ import annotations

from typing import Any

import pytest

from ra.effect_types import UnknownEffect
from ra.effects import always_executes, can_execute_locally, executes

VOTER_NODES = {"n1", "n2", "n3"}


@pytest.mark.parametrize(
    ("raft_state", "target", "own", "membership", "expected"),
    [
        # the leader: its own node, or a node that hosts no voter
        ("leader", "n1", "n1", "voter", True),
        ("leader", "n2", "n1", "voter", False),
        ("leader", "n4", "n1", "voter", True),
        # other states: only their own node, and only as a voter
        ("follower", "n2", "n2", "voter", True),
        ("follower", "n1", "n2", "voter", False),
        ("follower", "n4", "n2", "voter", False),
        ("follower", "n2", "n2", "non_voter", False),
        ("follower", "n2", "n2", "promotable", False),
        ("candidate", "n2", "n2", "voter", True),
        ("await_condition", "n2", "n2", "voter", True),
    ],
)
def test_local_rule(
    raft_state: str, target: str, own: str, membership: str, expected: bool
) -> None:
    assert can_execute_locally(raft_state, target, own, membership, VOTER_NODES) is expected


def test_non_voter_node_is_served_by_the_leader() -> None:
    # n4 only hosts a non-voter: the leader sends for it, the non-voter does not
    assert can_execute_locally("leader", "n4", "n1", "voter", VOTER_NODES)
    assert not can_execute_locally("follower", "n4", "n4", "non_voter", VOTER_NODES)


class Pid:
    def __init__(self, node: str) -> None:
        self.node = node


def run(effect: Any, raft_state: str, own: str = "n2", membership: str = "voter",
        **kw: Any) -> bool:
    return executes(effect, raft_state, own, membership, VOTER_NODES, **kw)


@pytest.mark.parametrize(
    "effect",
    [("send_msg", Pid("n2"), "m"), ("mod_call", "m", "f", []), ("append", "c"),
     ("append", "c", "noreply"), ("timer", "t", 10), ("monitor", "process", Pid("n2")),
     ("monitor", "node", "n2"), ("log", [1], "fun"), ("send_msg", Pid("n2"), "m", ["ra_event"]),
     ("notify", {}), ("reply", ("pid", "tag"), "r")],
)
def test_leader_only_effects(effect: Any) -> None:
    assert run(effect, "leader", own="n1")
    assert not run(effect, "follower")


@pytest.mark.parametrize(
    "effect",
    [("release_cursor", 5, "st"), ("release_cursor", 5), ("checkpoint", 5, "st"),
     ("aux", "eval"), "garbage_collection", ("demonitor", "process", "p"),
     ("try_append", "c", "noreply"), ("reply", "r")],
)
def test_every_member_effects(effect: Any) -> None:
    assert run(effect, "leader", own="n1")
    assert run(effect, "follower")
    assert run(effect, "candidate")


def test_send_msg_with_local_option_follows_the_local_rule() -> None:
    eff = ("send_msg", Pid("n2"), "m", ["ra_event", "local"])
    assert run(eff, "follower", own="n2")
    assert not run(eff, "leader", own="n1")
    assert not run(eff, "follower", own="n3")
    assert run(("send_msg", Pid("n2"), "m", "local"), "follower", own="n2")


def test_registered_names_and_server_ids_resolve_their_node() -> None:
    assert run(("send_msg", "some_name", "m", "local"), "follower", own="n2")
    assert run(("send_msg", ("name", "n2"), "m", "local"), "follower", own="n2")
    assert not run(("send_msg", ("name", "n3"), "m", "local"), "follower", own="n2")


def test_log_effect_with_local_node() -> None:
    eff = ("log", [1, 2], "fun", ("local", "n3"))
    assert run(eff, "follower", own="n3")
    assert not run(eff, "follower", own="n2")
    assert not run(eff, "leader", own="n1")


def test_machine_monitors_are_leader_only_but_other_components_run_anywhere() -> None:
    assert not run(("monitor", "process", "machine", "p"), "follower")
    assert run(("monitor", "process", "aux", "p"), "follower")


@pytest.mark.parametrize(
    ("replier", "raft_state", "own", "own_id", "expected"),
    [
        ("leader", "leader", "n1", ("s1", "n1"), True),
        ("leader", "follower", "n2", ("s2", "n2"), False),
        ("local", "follower", "n2", ("s2", "n2"), True),
        ("local", "leader", "n1", ("s1", "n1"), False),
        (("member", ("s3", "n3")), "follower", "n3", ("s3", "n3"), True),
        (("member", ("s3", "n3")), "leader", "n1", ("s1", "n1"), False),
        (("member", ("gone", "n9")), "leader", "n1", ("s1", "n1"), True),
        (("member", ("gone", "n9")), "follower", "n2", ("s2", "n2"), False),
    ],
)
def test_reply_from(replier: Any, raft_state: str, own: str, own_id: Any, expected: bool) -> None:
    members = [("s1", "n1"), ("s2", "n2"), ("s3", "n3")]
    eff = ("reply", (Pid("n2"), "tag"), ("wrap_reply", 1), replier)
    assert run(eff, raft_state, own=own, own_id=own_id, member_ids=members) is expected


def test_unknown_effects_raise() -> None:
    with pytest.raises(UnknownEffect):
        run(("no_such_effect", 1), "leader", own="n1")
    with pytest.raises(UnknownEffect):
        run("no_such_atom", "leader", own="n1")


EVERY_MEMBER_SAMPLES = [
    ("send_rpc", ("s2", "n2"), "rpc"), ("cast", ("s2", "n2"), "msg"), ("next_event", "evt"),
    ("record_leader_msg", ("s1", "n1")), ("aux", "eval"), ("release_cursor", 5, "state"),
    ("checkpoint", 5, "state"), ("demonitor", "process", Pid("n2")),
    ("send_ra_event", Pid("n3"), "evt"), ("bg_work", "job", "err"),
]
NOT_ALWAYS_SAMPLES = [
    ("send_msg", Pid("n2"), "m"), ("send_msg", Pid("n2"), "m", "local"), ("reply", "r"),
    ("reply", ("pid", "tag"), "r"), ("notify", {}), ("monitor", "process", Pid("n2")),
    ("log", [1], "fun"), ("append", "c"), "garbage_collection", ("unknown_effect",), (),
]


@pytest.mark.parametrize("effect", EVERY_MEMBER_SAMPLES)
@pytest.mark.parametrize("raft_state", ["leader", "follower", "candidate", "await_condition"])
@pytest.mark.parametrize("membership", ["voter", "non_voter"])
def test_an_effect_the_shell_runs_without_asking_is_one_every_member_executes(
    effect: Any, raft_state: str, membership: str
) -> None:
    assert always_executes(effect)
    assert run(effect, raft_state, membership=membership)


@pytest.mark.parametrize("effect", NOT_ALWAYS_SAMPLES)
def test_effects_that_depend_on_state_node_or_membership_go_through_executes(
    effect: Any,
) -> None:
    assert not always_executes(effect)
