"""`common.block_summary` decides from fixed-width aggregates which blocks of replica log
indexes need the exact per-index rules. A clean block it passes is never looked at
again, so it must flag every block that holds a violation (and count every decision)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from analysis import load, reference, runner, synthetic
from analysis.checks import common, local_delivery, replicas
from analysis.model import Params
from tests.analysis.conftest import arrow_tables


def _block(index: int) -> int:
    return index // common.LOG_BLOCK


def _at(row: dict[str, Any]) -> tuple[str, int]:
    """The `(queue, block)` of a replica row."""
    return row["queue"], _block(row["raft_index"])


def _summary(spark: SparkSession, syn: synthetic.Synthetic) -> tuple[set[tuple[str, int]], int]:
    """The suspect `(queue, block)` pairs, and the decisions the check counts."""
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    rows = common.block_summary(h).collect()
    decisions = local_delivery.run(h, Params()).counts["decisions"]
    h.unpersist()
    return {(r["queue"], r["block"]) for r in rows if r["suspect"]}, decisions


def _verdicts(spark: SparkSession, syn: synthetic.Synthetic) -> dict[str, tuple[str, int]]:
    """(status, violations) of replica determinism and local delivery."""
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    out = {}
    for c, run in (("replicas", replicas.run), ("local_delivery", local_delivery.run)):
        v = runner.verdict_of(run(h, Params()))[0]
        out[c] = (v.status, v.violations)
    h.unpersist()
    return out


def _decisions(syn: synthetic.Synthetic) -> int:
    return len({(r["queue"], r["msg_id"], r["attempt"], r["raft_index"], r["consumer_key"],
                 r["consumer_node"]) for r in syn.tables["replica_events"]
                if r["kind"] == "service_queue"})


def test_clean_log_has_no_suspect_block(spark: SparkSession) -> None:
    syn = synthetic.generate(11, 40)
    suspects, decisions = _summary(spark, syn)
    assert suspects == set()
    assert decisions == _decisions(syn)


def test_every_index_with_a_violation_is_in_a_suspect_block(spark: SparkSession) -> None:
    syn = synthetic.generate(12, 40, ("nondeterminism", "wrong_sender", "double_send"))
    suspects, decisions = _summary(spark, syn)
    ref = reference.RefHistory.from_rows(syn.tables)
    at = {(v[2], _block(v[6])) for check in (reference.replica_determinism,
                                             reference.local_delivery)
          for v in check(ref, Params()).violations if v[6] is not None}
    assert len(at) >= 2
    assert at <= suspects
    assert decisions == _decisions(syn)


def test_a_decision_one_server_lacks_makes_its_block_suspect(spark: SparkSession) -> None:
    syn = synthetic.generate(13, 20)
    rep = syn.tables["replica_events"]
    gone = next(r for r in rep if r["kind"] == "service_queue" and r["node"] == "n3")
    rep.remove(gone)
    suspects, _ = _summary(spark, syn)
    assert suspects == {_at(gone)}


def _busy_index(rep: list[dict[str, Any]]) -> dict[str, Any]:
    """An `applied` row of an index that holds a decision and its send."""
    sent = {(r["queue"], r["raft_index"]) for r in rep if r["kind"] == "local_delivery"}
    return next(r for r in rep if r["kind"] == "applied"
                and (r["queue"], r["raft_index"]) in sent)


def test_a_decision_recorded_twice_everywhere_and_sent_twice_is_a_double_send(
        spark: SparkSession) -> None:
    # sums see both copies on both sides, so the repeated send alone must flag the block
    syn = synthetic.generate(15, 20)
    rep = syn.tables["replica_events"]
    at = _busy_index(rep)
    key = (at["queue"], at["raft_index"])
    copies = [dict(r) for r in rep if r["kind"] in ("service_queue", "local_delivery")
              and (r["queue"], r["raft_index"]) == key]
    for r in copies:
        r["seq"] += 100_000
    rep.extend(copies)
    suspects, _ = _summary(spark, syn)
    assert suspects == {_at(at)}
    sends = sum(r["kind"] == "local_delivery" for r in copies)
    assert _verdicts(spark, syn)["local_delivery"] == ("fail", sends)


def test_a_server_that_applied_part_of_a_block_makes_it_suspect_yet_clean(
        spark: SparkSession) -> None:
    # a fourth server applied one index only (it joined late): the block differs
    # between servers, and the exact rules find nothing wrong there
    syn = synthetic.generate(14, 20)
    rep = syn.tables["replica_events"]
    busy = {(r["queue"], r["raft_index"]) for r in rep
            if r["kind"] in ("service_queue", "local_delivery")}
    row = next(r for r in rep if r["kind"] == "applied"
               and (r["queue"], r["raft_index"]) not in busy)
    rep.append({**row, "node": "x00", "emitter": f"x00/ra/{row['queue']}",
                "server": f"{row['queue']}@x00", "seq": 0})
    suspects, decisions = _summary(spark, syn)
    assert suspects == {_at(row)}
    assert decisions == _decisions(syn)
    assert _verdicts(spark, syn)["replicas"] == ("pass", 0)


def test_a_range_applied_again_on_one_server_makes_its_block_suspect(
        spark: SparkSession) -> None:
    # the same entries applied twice by one server (every row agrees): the summary
    # cannot tell a replay from a second, different apply, so the exact rules judge it
    syn = synthetic.generate(16, 20)
    rep = syn.tables["replica_events"]
    first = next(r for r in rep if r["kind"] == "applied" and r["node"] == "n2")
    again = [dict(r) for r in rep if r["kind"] == "applied" and r["server"] == first["server"]
             and first["raft_index"] <= r["raft_index"] < first["raft_index"] + 2]
    for r in again:
        r["seq"] += 100_000
    rep.extend(again)
    suspects, decisions = _summary(spark, syn)
    assert suspects == {_at(first)}
    assert decisions == _decisions(syn)


def test_a_leader_send_named_by_a_decision_of_another_term_is_found(
        spark: SparkSession) -> None:
    # every server's decision row says term 2, whose leader sent it; the index was
    # applied in term 1, whose leader should have: the summary must not trust the row
    syn = synthetic.generate(11, 40)
    rep = syn.tables["replica_events"]
    leaders = {(r["queue"], r["raft_term"]): r["leader"] for r in rep
               if r["kind"] == "leader_elected"}
    send = next(r for r in rep if r["kind"] == "local_delivery"
                and (r["queue"], 2) in leaders and r["server"] == leaders[(r["queue"], 1)])
    for r in rep:
        if r["kind"] == "service_queue" and _at(r) == _at(send) \
                and (r["raft_index"], r["msg_id"]) == (send["raft_index"], send["msg_id"]):
            r["raft_term"] = 2
    send["server"] = leaders[(send["queue"], 2)]
    suspects, _ = _summary(spark, syn)
    assert suspects == {_at(send)}
    assert _verdicts(spark, syn)["local_delivery"] == ("fail", 1)


def test_a_decision_for_the_leader_without_a_term_is_left_to_the_exact_rules(
        spark: SparkSession) -> None:
    # older records may lack a decision's term: its leader is unknown to the summary,
    # and the exact rules, which take the applied rows' term, find the block clean
    syn = synthetic.generate(11, 40)
    rep = syn.tables["replica_events"]
    servers = {r["queue"]: set() for r in rep}
    for r in rep:
        if r.get("server"):
            servers[r["queue"]].add(r["server"].split("@")[-1])
    row = next(r for r in rep if r["kind"] == "service_queue"
               and r["consumer_node"] not in servers[r["queue"]])
    for r in rep:
        if r["kind"] == "service_queue" and (r["queue"], r["raft_index"]) == (
                row["queue"], row["raft_index"]):
            r["raft_term"] = None
    suspects, decisions = _summary(spark, syn)
    assert suspects == {_at(row)}
    assert decisions == _decisions(syn)
    assert set(_verdicts(spark, syn).values()) == {("pass", 0)}
