"""The owner of a fifo client session refuses effects and calls it does not know."""

from __future__ import annotations

from typing import Any

import pytest

from fifo import client_owner
from fifo.client_effects import CancelTimer, Members


def test_an_unknown_effect_fails_loudly() -> None:
    bogus: Any = ("no_such_effect", 1)
    with pytest.raises(ValueError, match="unexpected fifo client effect"):
        client_owner.perform(bogus, {})


def test_a_call_handed_to_perform_fails_loudly() -> None:
    with pytest.raises(ValueError, match="unexpected fifo client effect"):
        client_owner.perform(Members("members", ("s", "n")), {})


def test_an_unknown_call_fails_loudly() -> None:
    with pytest.raises(ValueError, match="unexpected fifo client call"):
        client_owner.call(CancelTimer("cancel_timer", "ref"))
