"""The reference checker is laid out like the Spark checks it is the oracle for: one
module per check (checks that share a Spark module share a reference module), under a
package that still exports every name its callers import."""

from __future__ import annotations

from collections import defaultdict

from analysis import checks, final_state, reference

#: the final-state checks, which share one reference module where Spark has one each
FINAL_STATE = {final_state.EMPTINESS, final_state.DLX_LIVENESS}


def _grouped_by_module(table: dict[str, object]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = defaultdict(set)
    for name, fn in table.items():
        if name not in FINAL_STATE:
            groups[fn.__module__].add(name)
    return {frozenset(g) for g in groups.values()}


def test_every_reference_check_lives_in_a_module_of_the_package() -> None:
    outside = {name: fn.__module__ for name, fn in reference.ALL.items()
               if name not in FINAL_STATE
               and not fn.__module__.startswith("analysis.reference.")}
    assert outside == {}


def test_reference_modules_group_the_checks_as_the_spark_modules_do() -> None:
    assert set(reference.ALL) == set(checks.ALL)
    assert _grouped_by_module(reference.ALL) == _grouped_by_module(checks.ALL)


def test_the_names_callers_import_are_still_exported() -> None:
    for name in ("RefHistory", "RefResult", "ALL", "run_all", "total_queue",
                 "local_delivery", "replica_determinism", "latency_histograms",
                 "throughput", "replication_histograms", "wal_batches"):
        assert hasattr(reference, name), name
    assert callable(reference.local_delivery) and callable(reference.total_queue)
