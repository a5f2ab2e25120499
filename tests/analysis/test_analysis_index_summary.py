"""`common.index_summary` decides from fixed-width aggregates which replica log indexes
need the exact per-index rules. A clean index it passes is never looked at again, so
it must flag every index that holds a violation (and count every decision)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis import load, reference, runner, synthetic
from analysis.checks import common, replicas
from analysis.model import Params
from tests.analysis.conftest import arrow_tables


def _summary(spark: SparkSession, syn: synthetic.Synthetic) -> tuple[set[tuple[str, int]], int]:
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    rows = common.index_summary(h).collect()
    h.unpersist()
    return ({(r["queue"], r["raft_index"]) for r in rows if r["suspect"]},
            sum(r["decisions"] for r in rows))


def _decisions(syn: synthetic.Synthetic) -> int:
    return len({(r["queue"], r["msg_id"], r["attempt"], r["raft_index"], r["consumer_key"],
                 r["consumer_node"]) for r in syn.tables["replica_events"]
                if r["kind"] == "service_queue"})


def test_clean_log_has_no_suspect_index(spark: SparkSession) -> None:
    syn = synthetic.generate(11, 40)
    suspects, decisions = _summary(spark, syn)
    assert suspects == set()
    assert decisions == _decisions(syn)


def test_every_index_with_a_violation_is_suspect(spark: SparkSession) -> None:
    syn = synthetic.generate(12, 40, ("nondeterminism", "wrong_sender", "double_send"))
    suspects, decisions = _summary(spark, syn)
    ref = reference.RefHistory.from_rows(syn.tables)
    at = {(v[2], v[6]) for check in (reference.replica_determinism, reference.local_delivery)
          for v in check(ref, Params()).violations if v[6] is not None}
    assert len(at) >= 3
    assert at <= suspects
    assert decisions == _decisions(syn)


def test_a_decision_one_server_lacks_is_suspect(spark: SparkSession) -> None:
    syn = synthetic.generate(13, 20)
    rep = syn.tables["replica_events"]
    gone = next(r for r in rep if r["kind"] == "service_queue" and r["node"] == "n3")
    rep.remove(gone)
    suspects, _ = _summary(spark, syn)
    assert suspects == {(gone["queue"], gone["raft_index"])}


def _with_extra_servers(seed: int, extra: int) -> tuple[synthetic.Synthetic, tuple[str, int]]:
    """A clean history where `extra` more servers of one queue applied one index that
    holds no decision and no send (so their rows break no rule)."""
    syn = synthetic.generate(seed, 20)
    rep = syn.tables["replica_events"]
    busy = {(r["queue"], r["raft_index"]) for r in rep
            if r["kind"] in ("service_queue", "local_delivery")}
    row = next(r for r in rep if r["kind"] == "applied"
               and (r["queue"], r["raft_index"]) not in busy)
    for j in range(extra):  # named after the queue's own servers, so they sort last
        rep.append({**row, "node": f"x{j:02d}", "emitter": f"x{j:02d}/ra/{row['queue']}",
                    "server": f"{row['queue']}@x{j:02d}", "seq": 0})
    return syn, (row["queue"], row["raft_index"])


def test_servers_beyond_the_bits_make_their_indexes_suspect(spark: SparkSession) -> None:
    # 3 + 60 servers each have a bit; the 64th and 65th do not, and the exact rules
    # must judge the one index where they have rows
    syn, _ = _with_extra_servers(14, 60)
    assert _summary(spark, syn)[0] == set()
    syn, at = _with_extra_servers(14, 62)
    assert _summary(spark, syn)[0] == {at}
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    verdict, _ = runner.verdict_of(replicas.run(h, Params()))
    h.unpersist()
    assert (verdict.status, verdict.violations) == ("pass", 0)
