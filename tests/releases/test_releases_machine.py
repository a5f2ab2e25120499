"""Each release's record says what that release's queue machine does.

The record's delivery-limit fields are read by the channel (what `x-delivery-count`
carries) and by the history analysis (which returns can have dropped a message);
these tests run the same commands through the `rabbit_fifo` machine of each
release's `machine_version` and compare with the record, so a record that drifted
from its machine fails here rather than in a verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import make_checkout, make_return
from fifo.client_send import add_delivery_count_header
from fifo.mc import BasicMessage, get_annotation
from fifo.msg import msg_header
from fifo.versions import rules_for
from releases import RELEASES, Release
from tests.fifo.helpers import Driver, pid

P1 = pid(1)
C1 = pid(10)
SERIES = list(RELEASES)


def _consumed(release: Release, limit: int) -> tuple[Driver, Any]:
    """A queue of the release's machine with one message, checked out to one consumer
    (in the shape that version's client sends); the consumer's key."""
    d = Driver(machine_version=release.machine_version, delivery_limit=limit)
    d.enqueue(P1, 1, BasicMessage(b"m"))
    if release.machine_version <= 2:
        d.apply(make_checkout(("ct", C1), ("auto", 1, "simple_prefetch"), {}))
        return d, ("ct", C1)
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 1)), {}))
    return d, d.index


def _held(d: Driver, key: Any) -> tuple[int, Any]:
    """The message id and header of the one message the consumer holds."""
    ((msg_id, msg),) = d.state.consumers[key].checked_out.items()
    return msg_id, msg_header(msg)


def _redelivered(release: Release) -> tuple[Any, bool]:
    """A message requeued once by its consumer, as the release's client hands it to
    the channel on its next delivery (the message, its `redelivered` flag)."""
    d, key = _consumed(release, limit=10)
    msg_id, _header = _held(d, key)
    d.apply(make_return(key, [msg_id]))
    _msg_id, header = _held(d, key)
    return add_delivery_count_header(BasicMessage(b"m"), header,
                                     release.delivery_count_header)


@pytest.mark.parametrize("series", SERIES)
def test_requeues_count_toward_the_limit_as_the_record_says(series: str) -> None:
    release = RELEASES[series]
    d, key = _consumed(release, limit=1)
    for _ in range(3):  # basic.nack / basic.reject with requeue, three times
        if d.state.messages_total == 0:
            break
        msg_id, _header = _held(d, key)
        d.apply(make_return(key, [msg_id]))
    dropped = d.state.messages_total == 0
    assert dropped is release.requeue_counts_toward_limit


@pytest.mark.parametrize("series", SERIES)
def test_a_gone_consumer_returns_count_toward_the_limit_in_every_release(series: str) -> None:
    """The returns of a closed channel (its process down) are failed deliveries, also
    in 4.3: only the client's own requeues stopped counting."""
    release = RELEASES[series]
    d, _key = _consumed(release, limit=0)
    d.apply(("down", C1, "normal"))
    assert d.state.messages_total == 0


@pytest.mark.parametrize("series", SERIES)
def test_x_delivery_count_carries_the_counter_the_limit_is_tested_against(
        series: str) -> None:
    release = RELEASES[series]
    rules = rules_for(release.machine_version)
    assert rules.delivery_limit_counter == release.delivery_count_header
    d, key = _consumed(release, limit=10)
    msg_id, _header = _held(d, key)
    d.apply(make_return(key, [msg_id]))
    _msg_id, header = _held(d, key)
    counted = header.get(release.delivery_count_header, 0) if isinstance(header, dict) else 0
    assert counted == (1 if release.requeue_counts_toward_limit else 0)


@pytest.mark.parametrize("series", [s for s in SERIES if RELEASES[s].machine_version > 2])
def test_the_release_client_projects_its_counter_onto_a_redelivery(series: str) -> None:
    release = RELEASES[series]
    msg, redelivered = _redelivered(release)
    assert redelivered
    if release.delivery_count_header == "acquired_count":
        assert get_annotation("x-delivery-count", msg) == 1
    else:  # 4.3: no failed delivery yet, and the requeue shows as acquired
        assert get_annotation("x-delivery-count", msg) is None
        assert get_annotation("x-acquired-count", msg) == 1


def test_a_3_10_redelivery_carries_x_delivery_count_alone() -> None:
    """3.10's machine keeps one counter: a redelivery shows it as `x-delivery-count`
    and no `x-acquired-count`, as a 3.10.8 broker sends it."""
    release = RELEASES["3.10"]
    msg, redelivered = _redelivered(release)
    assert redelivered
    assert get_annotation("x-delivery-count", msg) == 1
    assert get_annotation("x-acquired-count", msg) is None


@pytest.mark.parametrize("series", SERIES)
def test_who_times_out_a_consumer_is_who_the_machine_says(series: str) -> None:
    release = RELEASES[series]
    in_queue = rules_for(release.machine_version).default_consumer_timeout is not None
    assert (release.consumer_timeout_enforcer == "queue") is in_queue
