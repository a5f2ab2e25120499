"""Wire records, reply modes and the ra_seq encoding, compared literally."""

from __future__ import annotations

import dataclasses
import random

import pytest

from ra import seq
from ra.types import (
    DUMMY_ENTRY,
    AppendEntriesReply,
    AppendEntriesRpc,
    InvalidReplyMode,
    PreVoteRpc,
    RequestVoteRpc,
    make_command,
    validate_reply_mode,
)


@pytest.mark.parametrize(
    ("record", "fields"),
    [
        (AppendEntriesRpc, ["term", "leader_id", "leader_commit", "prev_log_index",
                            "prev_log_term", "entries"]),
        (AppendEntriesReply, ["term", "success", "next_index", "last_index", "last_term"]),
        (RequestVoteRpc, ["term", "candidate_id", "last_log_index", "last_log_term"]),
    ],
)
def test_record_fields_keep_upstream_order(record: type, fields: list[str]) -> None:
    assert [f.name for f in dataclasses.fields(record)] == fields


def test_records_are_immutable_and_carry_their_erlang_name() -> None:
    rpc = AppendEntriesRpc(1, ("s1", "n1"), 0, 0, 0)
    assert rpc.entries == ()
    assert rpc.RECORD == "append_entries_rpc"
    with pytest.raises(dataclasses.FrozenInstanceError):
        rpc.term = 2  # type: ignore[misc]


def test_pre_vote_defaults_to_protocol_version_1() -> None:
    rpc = PreVoteRpc(machine_version=0, term=1, token=5, candidate_id=("a", "n"),
                     last_log_index=0, last_log_term=0)
    assert rpc.version == 1


def test_dummy_entry_is_index_zero_term_zero() -> None:
    assert DUMMY_ENTRY == (0, 0, None)


def test_make_command_stamps_from_only_for_calls() -> None:
    assert make_command("$usr", "x", "noreply", 17) == ("$usr", {"ts": 17}, "x", "noreply")
    assert make_command("$usr", "x", "await_consensus", 17, from_=("pid", "tag")) == (
        "$usr", {"from": ("pid", "tag"), "ts": 17}, "x", "await_consensus")


@pytest.mark.parametrize(
    "mode",
    ["after_log_append", "await_consensus", "noreply", ("notify", 1, "pid"),
     ("await_consensus", {"reply_from": "local"}),
     ("await_consensus", {"reply_from": ("member", ("s1", "n1"))}),
     ("await_consensus", {})],
)
def test_valid_reply_modes(mode: object) -> None:
    validate_reply_mode(mode)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("bogus", ("invalid_reply_mode", "bogus")),
        (("await_consensus", {"reply_from": "nobody"}), ("unknown_option", "reply_from", "nobody")),
        (("await_consensus", {"timeout": 5}), ("unknown_option", "timeout", 5)),
    ],
)
def test_invalid_reply_modes(mode: object, error: tuple[object, ...]) -> None:
    with pytest.raises(InvalidReplyMode) as info:
        validate_reply_mode(mode)
    assert info.value.error == error


def test_seq_collapses_only_at_three_consecutive() -> None:
    s: seq.Seq = []
    s = seq.append(1, s)
    s = seq.append(2, s)
    assert s == [2, 1]
    s = seq.append(3, s)
    assert s == [(1, 3)]
    s = seq.append(4, s)
    assert s == [(1, 4)]
    s = seq.append(9, s)
    assert s == [9, (1, 4)]


def test_seq_from_list_and_queries() -> None:
    s = seq.from_list([3, *range(20, 53), 55])
    assert s == [55, (20, 52), 3]
    assert seq.first(s) == 3 and seq.last(s) == 55
    assert seq.length(s) == 35
    assert seq.expand([5, (1, 3)]) == [1, 2, 3, 5]


def test_seq_from_list_is_appending_the_indexes_one_by_one() -> None:
    rng = random.Random(7)
    for _ in range(300):
        idxs = rng.sample(range(0, 40), rng.randint(0, 30))
        one_by_one: seq.Seq = []
        for idx in sorted(idxs):
            one_by_one = seq.append(idx, one_by_one)
        assert seq.from_list(idxs) == one_by_one, sorted(idxs)
    assert seq.from_list([4, 4, 5]) == [5, 4]  # duplicates count once


@pytest.mark.parametrize(
    ("ceil", "expected"),
    [(60, [55, (20, 52), 3]), (52, [(20, 52), 3]), (22, [(20, 22), 3]),
     (21, [21, 20, 3]), (20, [20, 3]), (10, [3]), (2, [])],
)
def test_seq_limit(ceil: int, expected: seq.Seq) -> None:
    assert seq.limit(ceil, [55, (20, 52), 3]) == expected


def test_seq_remove_prefix() -> None:
    assert seq.remove_prefix([(1, 3)], [(1, 5)]) == [5, 4]
    # confirmed indexes no longer pending are skipped
    assert seq.remove_prefix([(1, 4)], [(3, 6)]) == [6, 5]
    # a pending index the WAL skipped is not a prefix
    assert seq.remove_prefix([3], [(1, 4)]) is None
    assert seq.remove_prefix([(1, 9)], [(1, 4)]) == []


def test_seq_append_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError):
        seq.append(2, [5])
