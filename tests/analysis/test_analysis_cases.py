"""Each check on tiny hand-written histories: the reference checker finds exactly the
expected violation rows and verdicts, and Spark finds the same rows when all cases are
merged into one history and checked in a single pass."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis import load, reference, runner
from analysis.checks import replicas
from analysis.model import Params
from tests.analysis.cases import CASES, Builder
from tests.analysis.conftest import arrow_tables


def scope(expected: list[tuple[Any, ...]], statuses: dict[str, str]) -> set[str]:
    return set(statuses) | {v[0] for v in expected}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_finds_exactly_the_expected_rows(name: str) -> None:
    b = Builder()
    expected, statuses = CASES[name](b)
    results = reference.run_all(reference.RefHistory.from_rows(b.tables()))
    checks = scope(expected, statuses)
    got = sorted((v for c in checks for v in results[c].violations), key=repr)
    assert got == sorted(expected, key=repr)
    assert {c: results[c].status for c in statuses} == statuses


def test_undrained_run_is_unknown_not_lost() -> None:
    b = Builder()
    b.open("p")
    b.publish("q", 1)
    result = reference.total_queue(reference.RefHistory.from_rows(b.tables()), Params())
    assert (result.status, result.violations) == ("unknown", [])
    assert result.counts["confirmed"] == 1


def merged_cases() -> tuple[dict[str, list[dict[str, Any]]], dict[str, tuple[Any, ...]]]:
    tables: dict[str, list[dict[str, Any]]] = {}
    queues: dict[str, Any] = {}
    per_case = {}
    for i, name in enumerate(sorted(CASES)):
        b = Builder(prefix=f"k{i}.", msg_base=1000 * (i + 1))
        expected, statuses = CASES[name](b)
        per_case[name] = (b.p, expected, statuses)
        for t, rows in b.tables().items():
            if t != "run_meta":
                tables.setdefault(t, []).extend(rows)
        queues.update(b.queues)
    meta = Builder().tables()["run_meta"][0]
    meta["queues_json"] = json.dumps(queues)
    tables["run_meta"] = [meta]
    return tables, per_case


def test_spark_finds_the_same_rows_as_the_reference(spark: SparkSession) -> None:
    tables, per_case = merged_cases()
    h = load.from_arrow(spark, arrow_tables(tables))
    analysis = runner.run_checks(h)
    ref = reference.run_all(reference.RefHistory.from_rows(tables))
    rows = {c: sorted((tuple(r) for r in df.collect()), key=repr)
            for c, df in analysis.violations.items()}
    for verdict in analysis.verdicts:
        r = ref[verdict.check]
        assert rows[verdict.check] == r.violations, verdict.check
        # the verdict's number is counted apart from the rows (see `violation_count`)
        assert verdict.violations == len(r.violations), verdict.check
        assert (verdict.status, verdict.examined, verdict.counts) == \
            (r.status, r.examined, r.counts), verdict.check
    for name, (prefix, expected, statuses) in per_case.items():
        checks = scope(expected, statuses)
        mine = [v for c in checks for v in rows[c] if (v[2] or v[5] or "").startswith(prefix)]
        assert sorted(mine, key=repr) == sorted(expected, key=repr), name
    h.unpersist()


def test_missing_node_data_and_resends_are_counted_not_reported() -> None:
    results = {}
    for name in ("killed_sender_lost_its_last_sends",
                 "restarted_member_resends_but_never_twice_per_life"):
        b = Builder()
        CASES[name](b)
        results[name] = reference.run_all(reference.RefHistory.from_rows(b.tables()))
    killed = results["killed_sender_lost_its_last_sends"]["local_delivery"]
    assert (killed.counts["unrecorded_decisions"], killed.counts["unrecorded_deliveries"]) == (2, 2)
    assert killed.note.startswith("2 decisions and 2 client deliveries not decidable")
    resent = results["restarted_member_resends_but_never_twice_per_life"]["local_delivery"]
    assert resent.counts["resent_after_restart"] == 2


def test_redeliveries_the_replicas_judge_keep_the_client_figure_as_information() -> None:
    counts = {}
    for name in ("settled_message_decided_again_is_duplicated",
                 "an_ack_the_queue_never_settled_explains_the_redelivery",
                 "duplicate_beyond_redelivery"):
        b = Builder()
        CASES[name](b)
        result = reference.run_all(reference.RefHistory.from_rows(b.tables()))["total_queue"]
        counts[name] = (result.counts["duplicated_beyond_redelivery"],
                        result.counts["client_unexplained_redeliveries"])
    # the client form alone would report all three; without settled rows it still does
    assert counts == {"settled_message_decided_again_is_duplicated": (1, 1),
                      "an_ack_the_queue_never_settled_explains_the_redelivery": (0, 1),
                      "duplicate_beyond_redelivery": (1, 0)}


def test_a_duplicate_dead_letter_is_counted() -> None:
    b = Builder()
    CASES["dlx_duplicate_dead_letter_is_counted_not_lost"](b)
    result = reference.run_all(reference.RefHistory.from_rows(b.tables()))["dlx_at_least_once"]
    assert (result.counts["dlx_duplicates"], result.counts["dlx_lost"]) == (1, 0)


def test_apply_order_is_exact_when_server_hashes_collide(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Apply order sorts each server's rows by a hash of `(queue, server)`; when two
    pairs share one, the check sees it and sorts by the names instead. Here every pair
    shares one: the rows are still the reference's."""
    monkeypatch.setattr(replicas, "_pair_hash", lambda: F.lit(0).cast("long"))
    tables, _ = merged_cases()
    h = load.from_arrow(spark, arrow_tables(tables))
    analysis = runner.run_checks(h, only=[replicas.CHECK])
    ref = reference.run_all(reference.RefHistory.from_rows(tables))[replicas.CHECK]
    rows = sorted((tuple(r) for r in analysis.violations[replicas.CHECK].collect()), key=repr)
    assert rows == ref.violations
    assert any(r[1] == "apply_gap" for r in rows) and any(r[1] == "apply_repeat" for r in rows)
    (verdict,) = analysis.verdicts
    assert (verdict.violations, verdict.counts) == (len(ref.violations), ref.counts)
    h.unpersist()


def test_returns_out_of_order_are_told_in_the_note() -> None:
    notes = {}
    for name in ("returned_messages_come_back_in_the_order_they_were_held",
                 "returned_messages_out_of_order_at_the_next_consumer",
                 "a_hand_out_nobody_saw_is_not_judged"):
        b = Builder()
        CASES[name](b)
        notes[name] = reference.run_all(
            reference.RefHistory.from_rows(b.tables()))["ordering_returns"].note
    assert notes == {
        "returned_messages_come_back_in_the_order_they_were_held":
            "1 pair returned together and redelivered to one consumer, all in order "
            "(2 deliveries returned by their consumer's end, 2 traced to their next delivery)",
        "returned_messages_out_of_order_at_the_next_consumer":
            "1 of 1 pair returned together redelivered out of the order they were returned "
            "in (2 deliveries returned by their consumer's end, 2 traced to their next "
            "delivery)",
        "a_hand_out_nobody_saw_is_not_judged":
            "no pair returned together and redelivered to one consumer (2 deliveries "
            "returned by their consumer's end, 1 traced to their next delivery)"}
