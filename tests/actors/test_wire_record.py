"""`wire_record`: a dataclass pickled as its constructor call."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle

import pytest

from actors.wire import frozen_init, wire_record


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


# -- frozen_init: the same record, built without object.__setattr__ per field ---------

def _twins(**params: object) -> tuple[type, type]:
    """Two identical frozen slotted dataclasses, the second given `frozen_init`."""
    def make() -> type:
        @dataclasses.dataclass(frozen=True, slots=True, **params)  # type: ignore[call-overload]
        class Msg:
            exchange: str
            body: bytes
            ttl: int | None = None
            annotations: tuple[str, ...] = ()
            headers: dict[str, int] = dataclasses.field(default_factory=dict)
        return Msg
    return make(), frozen_init(make())


def test_frozen_init_builds_the_same_record_with_the_same_signature() -> None:
    plain, fast = _twins()
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    for args, kwargs in [(("x", b"b"), {}), (("x", b"b", 5, ("a",)), {"headers": {"h": 1}}),
                         ((), {"body": b"", "exchange": "e", "ttl": 0})]:
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert [getattr(b, f.name) for f in dataclasses.fields(fast)] == \
            [getattr(a, f.name) for f in dataclasses.fields(plain)]
        assert repr(b).replace("Msg", "") == repr(a).replace("Msg", "")
    # the factory runs per instance; the defaults are the declared ones
    one, two = fast("x", b""), fast("y", b"")
    assert one.headers == {} and one.headers is not two.headers and one.ttl is None
    with pytest.raises(TypeError):
        fast("x")  # a required field is still required
    with pytest.raises(TypeError):
        fast("x", b"", nope=1)


def test_a_frozen_init_record_stays_frozen_hashable_and_equal_by_value() -> None:
    plain, fast = _twins()
    rec = fast("x", b"b", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.ttl = 2  # type: ignore[misc]
    assert rec == fast("x", b"b", 1) and rec != fast("x", b"b", 2)
    # hashed by value like the dataclass it replaces (None: a hashable headers field)
    assert hash(fast("x", b"", 1, ("a",), None)) == hash(plain("x", b"", 1, ("a",), None))
    assert len({fast("x", b"", 1, (), None), fast("x", b"", 1, (), None)}) == 1
    assert copy.copy(rec) == rec and dataclasses.replace(rec, ttl=3).ttl == 3


def test_frozen_init_stores_through_the_slots_not_object_setattr() -> None:
    plain, fast = _twins()
    assert "__setattr__" in plain.__init__.__code__.co_names
    assert "__setattr__" not in fast.__init__.__code__.co_names
    # wire records get it whenever they can
    assert "__setattr__" not in Rpc.__init__.__code__.co_names
    assert pickle.loads(pickle.dumps(Rpc(1, (2,)))) == Rpc(1, (2,))


def test_frozen_init_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = dataclasses.field(kw_only=True)

    for cls, why in [(Mutable, "frozen dataclass with slots"),
                     (NoSlots, "frozen dataclass with slots"),
                     (Checked, "__post_init__"), (KeywordOnly, "positional")]:
        with pytest.raises(TypeError, match=why):
            frozen_init(cls)
    # wire_record leaves such a class its dataclass __init__
    wired = wire_record(Checked)
    assert "__setattr__" in wired.__init__.__code__.co_names


@pytest.mark.parametrize("path", [
    "actors.pid.Pid", "actors.pid.Ref", "ra.types.AppendEntriesRpc",
    "ra.types.AppendEntriesReply", "channel.queue_types.qq_message.QqMessage",
    "channel.protocol.framing.ContentHeader", "channel.protocol.framing.Content",
    "channel.protocol.framing.Out", "channel.queue_types.backend.Message",
    "channel.queue_types.backend.Delivery", "channel.queue_types.backend.Settled",
    "channel.queue_types.backend.Rejected", "channel.queue_types.backend.Deliver",
    "channel.protocol.assembler.Command", "channel.connection.confirms.Confirm",
    "channel.limits.credit_flow.Grant", "channel.connection.unacked.Pending",
    "fifo.client_records.ClientConsumer", "fifo.replica_trace.Before",
])
def test_the_records_built_for_every_message_use_frozen_init(path: str) -> None:
    """Each of these is built (or unpickled) at least once per message or Raft event."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert dataclasses.fields(cls) and "__setattr__" not in cls.__init__.__code__.co_names
