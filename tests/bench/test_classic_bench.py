"""The benches' classic-queue mode: what it measures, which node it reads, what it
compares (the figures themselves are bench output, never asserted).

`bench/e2e.py --queue-type classic` runs a persistent phase on a durable classic
queue and a transient one (`16bt`) on a non-durable queue, on warren nodes modelling
3.10 beside RabbitMQ 3.10.8, and compares confirmed and consumed rates of both;
`bench/memory.py --queue-type classic` reads the RSS of the queue's home node.
"""

from __future__ import annotations

from bench import e2e, memory


def test_classic_runs_a_persistent_and_a_transient_phase_modelling_3_10() -> None:
    phases = {p.name: p for p in e2e.PHASES}
    assert e2e.DEFAULT_PHASES["classic"].split(",") == ["16b", "16bt", "w1"]
    assert phases["16b"].persistent and not phases["16bt"].persistent
    assert (phases["16bt"].size, phases["16bt"].window) == (16, e2e.WINDOW)
    assert e2e.DEFAULT_RELEASE == {"quorum": None, "classic": "3.10"}


def test_a_classic_queue_s_node_roles_name_its_home_node() -> None:
    target = e2e.Target("rabbit", ["amqp://a", "amqp://b", "amqp://c"],
                        other_nodes={"node-1": 11, "node-2": 12, "node-3": 13},
                        queue_type="classic")
    assert target.node_pids("q") == {"home": 11, "node-2": 12, "node-3": 13}
    assert memory.roles(target) == {"home": 11, "node-2": 12, "node-3": 13}


def test_both_16_byte_variants_and_their_consumers_are_compared() -> None:
    timing = {"confirm_p50_ms": 1.0, "confirm_p99_ms": 2.0, "cpu_cores": {}}
    results = {"16b": {"msgs_s": 900.0, "consumer_msgs_s": 800.0, **timing},
               "16bt": {"msgs_s": 1800.0, "consumer_msgs_s": 400.0, **timing}}
    ours = {k: v for k, v in e2e.figures(results).items() if not isinstance(v, dict)}
    ref = {"msgs_s_16b": 1000.0, "msgs_s_16b_transient": 1000.0,
           "consumer_msgs_s_16b": 1000.0, "consumer_msgs_s_16b_transient": 1000.0}
    assert e2e.ratios(ours, ref) == {
        "ratio_msgs_s_16b_vs_reference": 0.9,
        "ratio_msgs_s_16b_transient_vs_reference": 1.8,
        "ratio_consumer_msgs_s_16b_vs_reference": 0.8,
        "ratio_consumer_msgs_s_16b_transient_vs_reference": 0.4}


def test_the_memory_headline_of_a_classic_queue_is_its_home_node_s() -> None:
    rows = [{"messages": 1000, "bytes_per_msg_home": 450.0,
             "bytes_per_msg_by_node": {"home": 450.0, "node-2": 0.0}, "fill_msgs_s": 9.0}]
    assert memory.headline(rows) == {"bytes_per_msg_home": 450.0, "fill_msgs_s": 9.0,
                                     "messages": 1000}
