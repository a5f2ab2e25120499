"""The store's rules as a table: state, command and time in, what must come out."""

from __future__ import annotations

import pytest

from examples.kv_store.core import Command, Expire, Get, Put, Result, StartTimer, apply

CASES: list[tuple[str, dict[str, tuple[object, int]], Command, int, Result]] = [
    ("put stores until now + ttl and starts a timer",
     {}, Put("k", 1, 100), 10, ({"k": (1, 110)}, "ok", [StartTimer(100)])),
    ("put replaces and restarts the time to live",
     {"k": (1, 110)}, Put("k", 2, 50), 20, ({"k": (2, 70)}, "ok", [StartTimer(50)])),
    ("get before expiry reads the value",
     {"k": (1, 110)}, Get("k"), 109, ({"k": (1, 110)}, ("ok", 1), [])),
    ("get at expiry reads missing, before the timer fires",
     {"k": (1, 110)}, Get("k"), 110, ({"k": (1, 110)}, "not_found", [])),
    ("get of a key never put",
     {}, Get("k"), 0, ({}, "not_found", [])),
    ("expire drops only what is due",
     {"a": (1, 100), "b": (2, 200)}, Expire(), 150, ({"b": (2, 200)}, None, [])),
]


@pytest.mark.parametrize(("state", "command", "now", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_apply(state: dict[str, tuple[object, int]], command: Command, now: int,
               expected: Result) -> None:
    assert apply(state, command, now) == expected
