"""`FaultRules` as a specification: what one frame from src to dst meets."""

from __future__ import annotations

from transports.faults import DELIVER, DROP, HOLD, FaultRules


def test_partition_lets_frames_cross_only_within_a_group() -> None:
    faults = FaultRules()
    faults.partition(["a"], ["b", "c"])
    assert faults.verdict("b", "c") == DELIVER
    assert faults.verdict("a", "b") == DROP
    assert faults.verdict("c", "a") == DROP


def test_by_default_a_node_in_no_group_is_isolated() -> None:
    faults = FaultRules()
    faults.partition(["a"], ["b"])
    assert faults.verdict("ctl", "a") == DROP
    assert faults.verdict("b", "ctl") == DROP


def test_unlisted_nodes_reach_both_sides_when_not_isolated() -> None:
    faults = FaultRules()
    faults.partition(["a"], ["b", "c"], isolate_unlisted=False)
    assert faults.verdict("a", "b") == DROP
    assert faults.verdict("ctl", "a") == DELIVER
    assert faults.verdict("b", "ctl") == DELIVER
    assert faults.connected("ctl", "other")


def test_heal_forgets_the_partition_and_its_mode() -> None:
    faults = FaultRules()
    faults.partition(["a"], ["b"], isolate_unlisted=False)
    faults.heal()
    assert faults.verdict("a", "b") == DELIVER
    faults.partition(["a"], ["b"])
    assert faults.verdict("ctl", "a") == DROP  # the default mode again


def test_a_paused_node_holds_every_frame_to_and_from_it() -> None:
    faults = FaultRules()
    faults.pause("a")
    assert faults.is_paused("a")
    assert faults.verdict("a", "ctl") == HOLD
    assert faults.verdict("b", "a") == HOLD
    faults.resume("a")
    assert faults.verdict("a", "b") == DELIVER


def test_a_pause_towards_some_peers_holds_only_their_frames() -> None:
    faults = FaultRules()
    faults.pause("a", towards=["b", "c"])
    assert not faults.is_paused("a")  # the transport keeps running for other nodes
    assert faults.verdict("a", "b") == HOLD
    assert faults.verdict("c", "a") == HOLD
    assert faults.holds("b", "a")
    assert faults.verdict("a", "ctl") == DELIVER
    assert faults.verdict("ctl", "a") == DELIVER
    assert faults.verdict("b", "c") == DELIVER
    faults.resume("a")
    assert not faults.holds("a", "b")


def test_only_the_paused_node_itself_is_paused_for_its_peers() -> None:
    faults = FaultRules()
    faults.pause("a", towards=["b"])
    assert faults.paused_for("a", "b")  # a handles nothing b sent it
    assert not faults.paused_for("b", "a")  # b still hears of its own session ending
    assert not faults.paused_for("a", "ctl")


def test_any_rule_is_false_only_when_nothing_is_injected() -> None:
    """The transport skips the rules for every frame while `any_rule` is False."""
    rules = FaultRules()
    assert not rules.any_rule()
    for set_one in (lambda: rules.partition(["a"], ["b"]), lambda: rules.drop("a", "b"),
                    lambda: rules.delay("a", "b", 0.5), lambda: rules.pause("a")):
        set_one()
        assert rules.any_rule()
        rules.heal()
        rules.resume("a")
        assert not rules.any_rule()
