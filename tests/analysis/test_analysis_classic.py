"""What `total_queue` counts for classic queues: messages RabbitMQ does not promise to
keep (a non-durable or exclusive queue's, or a transient message, on its home node's
kill; a deleted queue's; a queue's drops; an unroutable publish the broker returned)
are counted by why, not reported lost; a persistent message of a durable queue is."""

from __future__ import annotations

import pytest

from analysis import reference
from analysis.model import Params
from tests.analysis.cases import CASES, Builder

COUNTED = ("lost", "dropped", "unroutable", "deleted_with_queue", "lost_with_node")


@pytest.mark.parametrize(("name", "expected"), [
    ("classic_durable_queue_loses_a_persistent_message_to_a_kill", (1, 0, 0, 0, 0)),
    ("classic_transient_queue_goes_with_its_home_node", (0, 0, 0, 0, 1)),
    ("classic_exclusive_queue_goes_with_its_owner_node", (0, 0, 0, 0, 1)),
    ("classic_transient_message_goes_with_its_node_but_not_a_later_one", (1, 0, 0, 0, 1)),
    ("classic_exclusive_queue_deleted_with_its_owner_takes_its_messages", (0, 0, 1, 1, 0)),
    ("classic_drops_by_ttl_and_length_are_not_lost", (0, 1, 0, 0, 0)),
])
def test_classic_messages_are_counted_by_what_became_of_them(
        name: str, expected: tuple[int, ...]) -> None:
    b = Builder()
    CASES[name](b)
    result = reference.total_queue(reference.RefHistory.from_rows(b.tables()), Params())
    assert tuple(result.counts[k] for k in COUNTED) == expected


def test_the_note_says_what_was_not_lost_and_why() -> None:
    b = Builder()
    CASES["classic_exclusive_queue_deleted_with_its_owner_takes_its_messages"](b)
    result = reference.total_queue(reference.RefHistory.from_rows(b.tables()), Params())
    assert result.status == "pass"
    assert result.note == "1 returned unroutable; 1 deleted with their queue: not lost"
