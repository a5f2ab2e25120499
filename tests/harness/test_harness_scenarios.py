"""Scenario definitions: every shipped scenario is sound, and unsound ones are refused."""

from __future__ import annotations

import dataclasses

import pytest

from analysis.model import RunConfig
from harness.scenarios import SCENARIOS, ClientSpec, FaultSpec, QueueSpec, Scenario


def _base(**changes: object) -> Scenario:
    s = Scenario("t", "test", queues=(QueueSpec("q1"),),
                 clients=(ClientSpec("publisher", "q1"), ClientSpec("consumer", "q1")),
                 duration_s=10)
    return dataclasses.replace(s, **changes)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_shipped_scenario_validates(name: str) -> None:
    assert SCENARIOS[name].validate() == []


def test_the_required_scenarios_exist() -> None:
    assert set(SCENARIOS) == {"leader-failover", "consumer-crash", "partition-minority",
                              "partition-leader", "flow-overload", "poison-message",
                              "sac-fifo", "classic-rpc", "poison-requeue"}


def test_classic_rpc_kills_the_home_node_of_a_durable_classic_work_queue() -> None:
    s = SCENARIOS["classic-rpc"]
    (work,) = s.queues
    assert (work.name, work.queue_type, work.arguments()) == ("work", "classic", {})
    assert {c.role for c in s.clients} == {"rpc_client", "rpc_server"}
    # the runner declares every queue on the first node: n1 is the work queue's home
    assert [(f.fault, f.target) for f in s.faults] == [("kill", "node:n1")]
    assert s.expect["total_queue"] == "pass"


@pytest.mark.parametrize(("changes", "error"), [
    ({"faults": (FaultSpec("flood", 1, 1, "random"),)}, "unknown fault 'flood'"),
    ({"faults": (FaultSpec("kill", 1, 2, "leader:q9"),)}, "target queue 'q9' is not declared"),
    ({"faults": (FaultSpec("kill", 8, 5, "random"),)}, "ends after the workload"),
    ({"faults": (FaultSpec("pause", 1, 0, "random"),)}, "pause: needs a duration"),
    ({"faults": (FaultSpec("pause", 1, 1, "node:n4"),)}, "no node 'n4' in a 3-node cluster"),
    ({"faults": (FaultSpec("crash_channel", 1, 0, "random"),)},
     "target consumer-channel goes with crash_channel only"),
    ({"faults": (FaultSpec("partition", 1, 1, "follower:q1"),), "nodes": 2},
     "partition: needs three nodes or more"),
    ({"clients": (ClientSpec("publisher", "q1"),)}, "no consumer"),
    ({"clients": (ClientSpec("rpc_client", "q1"),)}, "no consumer"),
    ({"clients": (ClientSpec("rpc_client", "q1"), ClientSpec("servant", "q1"))},
     "unknown client role 'servant'"),
    ({"queues": (QueueSpec("q1", queue_type="classic"),),
      "faults": (FaultSpec("kill", 1, 2, "leader:q1"),)}, "leader:q1 needs a quorum queue"),
    ({"clients": (ClientSpec("consumer", "q2"),)}, "consumer on undeclared queue 'q2'"),
    ({"queues": (QueueSpec("q1", dlx_target="gone"),)}, "dead-letter target 'gone'"),
    ({"queues": (QueueSpec("q1", dlx_target="q1", dlx_strategy="at-least-once"),)},
     "needs overflow reject-publish"),
    ({"expect": {"total_queue": "fine"}}, "unknown status 'fine'"),
    ({"workload": "chaos"}, "unknown workload 'chaos'"),
    ({"state_digest_every": 0}, "state_digest_every must be at least 1"),
])
def test_unsound_scenarios_are_refused_with_a_reason(changes: dict[str, object],
                                                     error: str) -> None:
    errors = _base(**changes).validate()
    assert any(error in e for e in errors), errors


def test_queue_arguments_are_the_amqp_declare_arguments() -> None:
    q = QueueSpec("q1", sac=True, delivery_limit=2, dlx_target="q1.dlx",
                  dlx_strategy="at-least-once", overflow="reject-publish", max_length=100)
    assert q.arguments() == {
        "x-queue-type": "quorum", "x-single-active-consumer": True, "x-delivery-limit": 2,
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "q1.dlx",
        "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
        "x-max-length": 100}
    assert QueueSpec("c", queue_type="classic").arguments() == {}


def test_run_meta_tells_the_analysis_which_checks_apply() -> None:
    sac = RunConfig(queues=SCENARIOS["sac-fifo"].queues_meta())
    assert sac.sac_fifo_queues() == ["q1"]
    poison = RunConfig(queues=SCENARIOS["poison-message"].queues_meta())
    assert poison.dlx_sources() == ["q1"]
    assert poison.dlx_queues() == ["q1"]
    plain = RunConfig(queues=SCENARIOS["leader-failover"].queues_meta())
    assert plain.sac_fifo_queues() == [] and plain.dlx_sources() == []


def test_scaling_the_duration_scales_the_fault_schedule() -> None:
    s = SCENARIOS["partition-minority"]
    half = s.scaled(s.duration_s / 2, nodes=5)
    assert half.duration_s == s.duration_s / 2 and half.nodes == 5
    assert [(f.at_s, f.for_s) for f in half.faults] == [
        (f.at_s / 2, f.for_s / 2) for f in s.faults]
    assert half.validate() == []
    assert s.scaled() == s


def test_a_scenario_run_refuses_a_release_warren_does_not_model(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 64 and one line naming the releases, before any node starts."""
    from harness.cli import main

    assert main(["scenario", "run", "poison-requeue", "--rabbitmq-version", "3.9"]) == 64
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--rabbitmq-version '3.9': one of 3.10, 4.0, 4.2, 4.3" in err
