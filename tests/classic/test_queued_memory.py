"""What a queued message costs a classic queue's memory, beside the message itself.

A classic queue keeps its transient messages in memory, so a backlog of a million
small messages is a million of everything the queue keeps per message. A message
that was never returned sits in its priority level's deque (one slot); only a
returned message pays a heap entry beside it. A message whose publisher was
confirmed when it arrived keeps no confirm number.
"""

from __future__ import annotations

import gc
import tracemalloc

from classic import commands as c
from classic.ready import Entry, ReadyQueue
from tests.classic.helpers import Q

N = 20_000


def _entry(msg_id: int) -> Entry:
    return Entry(msg_id, "", ("q",), 16, False, 0, None, None, None, None, None)


def _traced_bytes_per_push(entries: list[Entry]) -> float:
    ready = ReadyQueue()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for entry in entries:
            ready.push(entry)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(ready) == len(entries)
    return (after - before) / len(entries)


def test_a_published_message_costs_the_ready_queue_one_slot() -> None:
    entries = [_entry(i) for i in range(1, N + 1)]
    assert _traced_bytes_per_push(entries) < 12  # a deque slot: 8 bytes and its blocks


def test_returned_messages_keep_their_places_among_fresh_ones() -> None:
    ready = ReadyQueue()
    for i in (1, 2, 3, 4, 5, 6):
        ready.push(_entry(i))
    taken = [ready.pop() for _ in range(4)]  # 1..4 out, 5 and 6 wait
    ready.push(_entry(7))
    for entry in reversed(taken[1:3]):  # 3 and 2 come back, behind 7 in time
        ready.push(entry)
    assert [x.msg_id for x in ready] == [2, 3, 5, 6, 7]
    head = ready.peek()
    assert head is not None and head.msg_id == 2
    assert [ready.pop().msg_id for _ in range(5)] == [2, 3, 5, 6, 7]


def test_a_message_confirmed_on_arrival_keeps_no_confirm_number() -> None:
    q = Q()
    q.publish("transient")
    (entry,) = q.queue.live.values()
    assert entry.seq is None


def test_a_message_waiting_for_its_write_keeps_its_confirm_number() -> None:
    q = Q(durable=True)
    q.publish("persistent", persistent=True)
    (entry,) = q.queue.live.values()
    assert entry.seq == 1
    _, effects = q.do(c.Written((entry.msg_id,)))
    assert effects and entry.confirm_pending is False
