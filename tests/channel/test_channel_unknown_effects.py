"""The channel's executors refuse what they do not know instead of dropping it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from channel.connection.channel import ChannelProcess
from channel.limits.alarm import Alarm


def test_the_alarm_hub_refuses_an_unknown_effect() -> None:
    node: Any = SimpleNamespace(name="n1@127.0.0.1:1")
    bogus: Any = ("no_such_effect", 1, 2)
    with pytest.raises(AssertionError):
        Alarm(node).run([bogus])


def test_a_channel_refuses_an_unknown_queue_action() -> None:
    channel = ChannelProcess.__new__(ChannelProcess)
    bogus: Any = ("no_such_action",)
    with pytest.raises(AssertionError):
        channel.handle_actions([bogus])
