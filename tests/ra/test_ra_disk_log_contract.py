"""The log contract the pure core relies on, run against `MemoryLog` and `DiskLog`.

Each test builds its log through `make_log`, which gives both kinds the same
starting point (entries written, confirmed up to `written_upto`, nothing
waiting for the WAL), so every assertion holds for either log.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from ra import seq as ra_seq
from ra.disk_log import DiskLog, run_bg_work
from ra.log import MemoryLog
from ra.log_base import WalDown
from ra.types import DUMMY_ENTRY, Entry
from tests.ra.ra_testlib import entries, entry

CLUSTER = {("s1", "n1"): {}, ("s2", "n2"): {}}
MakeLog = Callable[..., Any]


def meta(idx: int, term: int, ver: int = 0) -> dict[str, Any]:
    return {"index": idx, "term": term, "cluster": CLUSTER, "machine_version": ver}


def written_events(es: list[Entry], upto: int) -> list[tuple[str, int, ra_seq.Seq]]:
    out = []
    for term, group in itertools.groupby([e for e in es if e[0] <= upto], key=lambda e: e[1]):
        out.append(("written", term, ra_seq.from_list(e[0] for e in group)))
    return out


@pytest.fixture(params=["memory", "disk"])
def make_log(request: pytest.FixtureRequest, tmp_path: Any) -> MakeLog:
    counter = itertools.count()

    def make(es: list[Entry] | None = None, written_upto: int | None = None,
             **opts: Any) -> Any:
        es = es or []
        upto = es[-1][0] if es and written_upto is None else (written_upto or 0)
        if request.param == "memory":
            log = MemoryLog(es, written_upto=upto, **opts)
        else:
            log = DiskLog.open(str(tmp_path / f"log{next(counter)}"), "uid", **opts)
            if es:
                log.write(es)
            for evt in written_events(es, upto):
                log.handle_event(evt)
        log.take_wal_writes()
        return log

    return make


def snap_written(idx: int, term: int, kind: str = "snapshot") -> tuple[Any, ...]:
    return ("snapshot_written", (idx, term), [], kind)


# --- a fresh log ----------------------------------------------------------------------


def test_a_fresh_log_holds_only_the_dummy_entry(make_log: MakeLog) -> None:
    log = make_log()
    assert log.is_new()
    assert log.fetch(0) == DUMMY_ENTRY and log.fetch(1) is None
    assert (log.first_index(), log.next_index()) == (0, 1)
    assert log.last_index_term() == (0, 0) == log.last_written()
    assert log.snapshot_index_term() is None and log.recovery_snapshot() is None
    assert log.pending() == [] and log.take_wal_writes() == []


# --- append and write -----------------------------------------------------------------


def test_append_is_next_index_only_and_written_only_when_the_wal_says(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1))
    log.append(entry(3, 1))
    assert log.last_index_term() == (3, 1) and log.last_written() == (2, 1)
    assert log.pending() == [3] and log.take_wal_writes() == [[entry(3, 1)]]
    with pytest.raises(ValueError):
        log.append(entry(5, 1))
    log.handle_event(("written", 1, [3]))
    assert log.last_written() == (3, 1) and log.pending() == []
    assert not log.is_new()


def test_entries_and_terms_are_served_in_range_only(make_log: MakeLog) -> None:
    es = entries(1, 1, 2, 2, 3)
    log = make_log(es)
    assert [log.fetch(i) for i in range(1, 6)] == es and log.fetch(6) is None
    assert [log.fetch_term(i) for i in range(0, 7)] == [0, 1, 1, 2, 2, 3, None]
    assert log.fold(2, 4) == es[1:4] and log.fold(4, 99) == es[3:] and log.fold(3, 2) == []
    assert log.exists(4, 2) and not log.exists(4, 3)


def test_a_follower_overwrite_truncates_and_lowers_last_written(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1, 1, 1), written_upto=4)
    log.write(entries(2, 2, first=3))
    assert log.last_index_term() == (4, 2) and log.last_written() == (2, 1)
    assert log.fold(1, 4) == entries(1, 1) + entries(2, 2, first=3)
    assert log.pending() == [4, 3]
    # a late written for the overwritten term confirms only the still-valid prefix
    log.handle_event(("written", 1, [(1, 4)]))
    assert log.last_written() == (2, 1)
    log.handle_event(("written", 2, [4, 3]))
    assert log.last_written() == (4, 2) and log.pending() == []


def test_a_write_that_leaves_a_gap_is_refused(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1))
    with pytest.raises(ValueError):
        log.write(entries(1, first=4))
    log.write([])  # nothing to do
    assert log.last_index_term() == (2, 1)


def test_set_last_index_forces_the_end_back(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1, 1, 1), written_upto=3)
    log.set_last_index(2)
    assert log.last_index_term() == (2, 1) and log.last_written() == (2, 1)
    assert log.fetch(3) is None and log.pending() == []
    log.set_last_index(7)  # beyond the end: nothing happens
    assert log.next_index() == 3


def test_contiguous_appends_reach_the_wal_as_one_write_an_overwrite_apart(
    make_log: MakeLog,
) -> None:
    log = make_log(entries(1, 1))
    log.write([entry(3, 1)])
    for idx in (4, 5):
        log.append(entry(idx, 1))
    assert log.take_wal_writes() == [entries(1, 1, 1, first=3)]
    log.append(entry(6, 1))
    log.write([entry(4, 2)])  # a new leader's entry overwrites index 4: a write of its own
    assert log.take_wal_writes() == [[entry(6, 1)], [entry(4, 2)]]


def test_resend_write_resends_from_the_asked_index(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1, 1, 1), written_upto=1)
    log.handle_event(("resend_write", 3))
    assert log.take_wal_writes() == [entries(1, 1, first=3)]


def test_a_written_that_skips_a_pending_index_resends_everything_pending(
    make_log: MakeLog,
) -> None:
    log = make_log(entries(1, 1, 1, 1), written_upto=1)
    log.handle_event(("written", 1, [4]))
    assert log.last_written() == (4, 1)
    assert log.take_wal_writes() == [entries(1, 1, 1, first=2)]


def test_writes_fail_when_the_wal_is_down(make_log: MakeLog) -> None:
    log = make_log(entries(1))
    log.wal_up = False
    assert not log.can_write()
    with pytest.raises(WalDown):
        log.append(entry(2, 1))
    with pytest.raises(WalDown):
        log.write([entry(2, 1)])
    assert log.next_index() == 2


# --- snapshots and checkpoints ------------------------------------------------------------


def test_release_cursor_writes_in_the_background_and_truncates_only_when_written(
    make_log: MakeLog,
) -> None:
    log = make_log(entries(*[1] * 10), min_snapshot_interval=4)
    effects = log.update_release_cursor(6, CLUSTER, 0, "state6")
    assert effects == [("bg_work", ("write_snapshot", "snapshot", meta(6, 1), "state6"),
                        ("snapshot_error", (6, 1), "snapshot"))]
    assert log.fetch(1) is not None and log.snapshot_index_term() is None
    assert log.pending_snapshot() == ("snapshot", (6, 1))
    log.handle_event(snap_written(6, 1))
    assert log.snapshot_index_term() == (6, 1) and log.pending_snapshot() is None
    assert log.first_index() == 7 and log.fetch(6) is None and log.fetch(7) is not None
    assert log.fetch_term(6) is None and log.last_index_term() == (10, 1)
    assert log.current_snapshot() == (meta(6, 1), "state6")


@pytest.mark.parametrize(
    ("snap_first", "idx", "starts"),
    [(None, 4, False), (None, 5, True), (5, 9, False), (5, 10, True)],
)
def test_min_snapshot_interval(make_log: MakeLog, snap_first: int | None, idx: int,
                               starts: bool) -> None:
    log = make_log(entries(*[1] * 12), min_snapshot_interval=4)
    if snap_first is not None:
        log.update_release_cursor(snap_first, CLUSTER, 0, "s")
        log.handle_event(snap_written(snap_first, 1))
    assert bool(log.update_release_cursor(idx, CLUSTER, 0, "s")) is starts


def test_one_snapshot_write_at_a_time_and_errors_clear_it(make_log: MakeLog) -> None:
    log = make_log(entries(*[1] * 12), min_snapshot_interval=4)
    assert log.update_release_cursor(6, CLUSTER, 0, "a")
    assert log.update_release_cursor(11, CLUSTER, 0, "b") == []
    log.handle_event(("snapshot_error", (6, 1), "snapshot", "enospc"))
    assert log.snapshot_index_term() is None and log.pending_snapshot() is None
    assert log.update_release_cursor(11, CLUSTER, 0, "b")


def test_a_snapshot_of_the_whole_log_leaves_it_empty_but_continuing(make_log: MakeLog) -> None:
    log = make_log(entries(*[1] * 6), min_snapshot_interval=1)
    log.update_release_cursor(6, CLUSTER, 0, "s6")
    log.handle_event(snap_written(6, 1))
    assert log.last_index_term() == (6, 1) and log.next_index() == 7
    log.append(entry(7, 2))
    assert log.fold(0, 10) == [entry(7, 2)]


def test_stale_snapshot_written_is_ignored(make_log: MakeLog) -> None:
    log = make_log(entries(*[1] * 12), min_snapshot_interval=4)
    log.update_release_cursor(6, CLUSTER, 0, "a")
    log.install_snapshot(meta(10, 1), "installed")
    log.handle_event(snap_written(6, 1))
    assert log.snapshot_index_term() == (10, 1)
    assert log.current_snapshot() == (meta(10, 1), "installed")


def test_installing_a_snapshot_drops_the_whole_range(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1, 1, 1), written_upto=2)
    log.install_snapshot(meta(20, 3), "state20")
    assert log.first_index() == 21 and log.next_index() == 21
    assert log.last_index_term() == (20, 3) == log.last_written()
    assert log.fetch(3) is None and log.pending() == []
    log.write([entry(21, 3)])
    assert log.fold(0, 30) == [entry(21, 3)]


def test_written_events_below_the_snapshot_are_harmless(make_log: MakeLog) -> None:
    log = make_log(entries(1, 1, 1, 1, 1, 1), written_upto=2, min_snapshot_interval=1)
    log.update_release_cursor(4, CLUSTER, 0, "s")
    log.handle_event(snap_written(4, 1))
    assert log.last_written() == (4, 1)
    log.handle_event(("written", 1, [(3, 6)]))
    assert log.last_written() == (6, 1) and log.pending() == []


def test_checkpoints_never_truncate_and_promotion_does(make_log: MakeLog) -> None:
    log = make_log(entries(*[1] * 12), min_snapshot_interval=4, min_checkpoint_interval=4)
    log.checkpoint(5, CLUSTER, 0, "c5")
    log.handle_event(snap_written(5, 1, "checkpoint"))
    assert log.fetch(1) is not None and log.snapshot_index_term() is None
    assert log.latest_checkpoint_index() == 5
    assert log.checkpoint(9, CLUSTER, 0, "c9") == []
    log.checkpoint(10, CLUSTER, 0, "c10")
    log.handle_event(snap_written(10, 1, "checkpoint"))
    effects = log.promote_checkpoint(8)
    assert effects == [("bg_work", ("promote_checkpoint", (5, 1)),
                        ("snapshot_error", (5, 1), "snapshot"))]
    log.handle_event(snap_written(5, 1))
    assert log.snapshot_index_term() == (5, 1) and log.first_index() == 6
    assert [c[0]["index"] for c in log.checkpoints()] == [10]
    assert log.recovery_snapshot() == (meta(10, 1), "c10")


def test_promotion_without_a_checkpoint_does_nothing(make_log: MakeLog) -> None:
    assert make_log(entries(*[1] * 12)).promote_checkpoint(8) == []


def test_over_max_checkpoints_the_one_between_two_close_ones_goes(make_log: MakeLog) -> None:
    log = make_log(entries(*[1] * 12), min_checkpoint_interval=0, max_checkpoints=2)
    for idx in (3, 6, 9):
        log.checkpoint(idx, CLUSTER, 0, idx)
        log.handle_event(snap_written(idx, 1, "checkpoint"))
    assert [c[1] for c in log.checkpoints()] == [3, 9]


def test_the_snapshot_mark_changes_with_every_snapshot_and_checkpoint(make_log: MakeLog) -> None:
    """What the server shell compares after each event to know when to persist."""
    log = make_log(entries(*[1] * 12), min_snapshot_interval=0, min_checkpoint_interval=0,
                   max_checkpoints=2)
    marks = [log.snapshot_mark()]
    for idx in (3, 6, 9):  # the third thins out the second: still two checkpoints
        log.checkpoint(idx, CLUSTER, 0, idx)
        log.handle_event(snap_written(idx, 1, "checkpoint"))
        marks.append(log.snapshot_mark())
    log.update_release_cursor(10, CLUSTER, 0, "s10")
    log.handle_event(snap_written(10, 1))
    marks.append(log.snapshot_mark())
    assert [m[1] for m in marks] == [0, 1, 2, 2, marks[-1][1]]
    assert all(a != b for a, b in itertools.pairwise(marks))
    assert log.snapshot_mark() == marks[-1]  # nothing happened: the same mark


def test_bg_work_runs_for_either_log(make_log: MakeLog) -> None:
    """`run_bg_work` is the one way a shell executes the effect, whatever the log."""
    log = make_log(entries(*[1] * 12), min_snapshot_interval=4, min_checkpoint_interval=4)
    (eff,) = log.checkpoint(5, CLUSTER, 0, "c5")
    tag, evt = run_bg_work(log, eff)
    assert tag == "ra_log_event" and evt[:4] == snap_written(5, 1, "checkpoint")
    log.handle_event(evt)
    (eff,) = log.promote_checkpoint(7)
    log.handle_event(run_bg_work(log, eff)[1])
    (eff,) = log.update_release_cursor(11, CLUSTER, 0, "s11")
    log.handle_event(run_bg_work(log, eff)[1])
    assert log.current_snapshot() == (meta(11, 1), "s11") and log.first_index() == 12
    assert run_bg_work(log, ("bg_work", ("bogus",), ("snapshot_error", (1, 1), "snapshot"))
                       )[1][:3] == ("snapshot_error", (1, 1), "snapshot")
