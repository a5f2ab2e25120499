"""The gevent runtime as a plain pykka actor."""

from __future__ import annotations

from typing import Any

import gevent
import pykka
import pytest

from actors.runtime_gevent import EMPTY, GeventFuture, GreenActor, Mailbox


class Adder(GreenActor):
    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        if message == "exit":
            raise gevent.GreenletExit
        self.total += message
        return self.total


def test_tell_and_ask_on_greenlets() -> None:
    ref = Adder.start()
    try:
        for i in range(100):
            ref.tell(i)
        assert ref.ask(0) == sum(range(100))
        future = ref.ask(1, block=False)
        assert isinstance(future, GeventFuture)
        assert future.get(timeout=1) == sum(range(100)) + 1
    finally:
        ref.stop()


def test_exception_in_ask_is_returned_and_actor_lives() -> None:
    ref = Adder.start()
    try:
        with pytest.raises(ValueError):
            ref.ask("boom")
        assert ref.ask(5) == 5
    finally:
        ref.stop()


def test_base_exception_stops_only_that_actor() -> None:
    victim = Adder.start()
    bystander = Adder.start()
    try:
        victim.tell("exit")
        gevent.sleep(0.01)
        assert not victim.is_alive()
        assert bystander.is_alive()
        assert bystander.ask(3) == 3
    finally:
        bystander.stop()


def test_future_timeout_raises_pykka_timeout() -> None:
    with pytest.raises(pykka.Timeout):
        GeventFuture().get(timeout=0.01)


def test_mailbox_get_blocks_a_greenlet_not_the_hub() -> None:
    box = Mailbox()
    got: list[Any] = []
    g = gevent.spawn(lambda: got.append(box.get()))
    gevent.sleep(0)
    assert got == []
    box.put("x")
    g.join(1)
    assert got == ["x"]
    assert box.get(0.01) is EMPTY


def test_mailbox_selective_take_and_remove() -> None:
    box = Mailbox()
    for m in (1, "a", 2, "b"):
        box.put(m)
    assert box.take_first(lambda m: isinstance(m, str), 0) == "a"
    assert box.remove_first(lambda m: m == 2) == 2
    assert list(box) == [1, "b"]
    assert box.take_first(lambda m: m == "never", 0.01) is EMPTY
