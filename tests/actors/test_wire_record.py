"""`wire_record`: a dataclass pickled as its constructor call."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from actors.wire import wire_record


@wire_record
@dataclasses.dataclass(frozen=True, slots=True)
class Rpc:
    term: int
    entries: tuple[int, ...] = ()


@wire_record
@dataclasses.dataclass(frozen=True, slots=True)
class One:
    only: str


def test_a_record_round_trips_by_its_constructor_without_the_fields_walk() -> None:
    rpc = Rpc(3, (1, 2))
    assert pickle.loads(pickle.dumps(rpc, protocol=5)) == rpc
    assert rpc.__reduce__() == (Rpc, (3, (1, 2)))
    assert pickle.loads(pickle.dumps(One("x"))) == One("x")
    assert copy.deepcopy(rpc) == rpc and copy.copy(One("y")) == One("y")


def test_a_field_outside_init_is_refused() -> None:
    with pytest.raises(TypeError, match="__init__ argument"):
        @wire_record
        @dataclasses.dataclass(frozen=True, slots=True)
        class Derived:
            a: int
            b: int = dataclasses.field(init=False, default=0)
