"""The ra_machine behaviour's defaults and the apply-result normalisation."""

from __future__ import annotations

from typing import Any

import pytest

from ra.machine import Machine, SimpleMachine, call_state_enter, flatten, normalise_apply_result


class Bare(Machine):
    def init(self, config: dict[str, Any]) -> Any:
        return config["name"]

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return (state, command)


def test_defaults_of_the_callback_table() -> None:
    m = Bare()
    assert m.init({"name": "q"}) == "q"
    assert m.state_enter("leader", 1) == []
    assert m.tick(0, 1) == []
    assert m.init_aux("q") is None
    assert m.overview({"a": 1}) == {"a": 1}
    assert m.version() == 0
    assert m.which_module(3) is m
    assert m.snapshot_installed({}, 1, None, None) == []
    assert m.live_indexes(1) == []
    # no aux handler unless the machine writes one: calls are then refused
    assert not hasattr(m, "handle_aux")


def test_two_tuple_means_no_effects() -> None:
    assert normalise_apply_result((1, "r")) == (1, "r", [])


def test_single_effect_becomes_a_list() -> None:
    assert normalise_apply_result((1, "r", ("timer", "t", 5))) == (1, "r", [("timer", "t", 5)])


def test_nested_effect_lists_flatten_in_order() -> None:
    effects = [("a",), None, [("b",), [None, ("c",), []], ("d",)], "garbage_collection"]
    assert flatten(effects) == [("a",), ("b",), ("c",), ("d",), "garbage_collection"]
    assert flatten(None) == [] and flatten(("e",)) == [("e",)]


def test_a_flat_effect_list_comes_back_as_a_copy() -> None:
    flat = [("a",), "garbage_collection"]
    out = flatten(flat)
    assert out == flat and out is not flat
    assert flatten([("a",), None]) == [("a",)]


def test_bad_apply_result_is_rejected() -> None:
    with pytest.raises(TypeError):
        normalise_apply_result("nope")


def test_duck_typed_machine_without_state_enter_gets_the_default() -> None:
    class Duck:
        pass

    assert call_state_enter(Duck(), "leader", None) == []


def test_simple_machine_replies_with_new_state() -> None:
    m = SimpleMachine(lambda cmd, st: st + cmd, 10)
    assert m.apply({}, 5, m.init({})) == (15, 15)
