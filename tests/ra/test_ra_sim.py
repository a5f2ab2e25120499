"""Three pure cores in the deterministic simulation: end-to-end Raft, and
randomised drops and partitions that must never break election safety or
state machine safety."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ra.sim import SafetyViolation, Sim

NODES = ["n1", "n2", "n3"]


def started(seed: int, drop_rate: float = 0.0) -> Sim:
    sim = Sim(seed=seed, drop_rate=drop_rate)
    sim.trigger_election(sim.ids[0])
    assert sim.run_until_leader() is not None
    return sim


def snapshot(sim: Sim) -> list[tuple[object, ...]]:
    return [(s.role, s.state.current_term, s.state.last_applied, s.state.machine_state)
            for s in sim.servers.values()]


def test_a_new_cluster_elects_the_triggered_server_and_stays_silent_otherwise() -> None:
    sim = Sim(seed=3)
    sim.run_for(20_000)
    assert sim.leader() is None  # brand-new servers wait for trigger_election
    sim.trigger_election(sim.ids[1])
    assert sim.run_until_leader() == sim.ids[1]


def test_commands_are_applied_everywhere_in_order_and_notified_in_log_order() -> None:
    sim = started(seed=11)
    for i in range(1, 21):
        sim.command(("add", i), i)
    sim.run_for(2_000)
    totals = [sum(range(1, i + 1)) for i in range(1, 21)]
    assert sim.notified == list(zip(range(1, 21), totals, strict=True))
    assert {s.state.machine_state for s in sim.servers.values()} == {210}
    sim.check_log_matching()


def test_same_seed_same_run() -> None:
    def run(seed: int) -> list[tuple[object, ...]]:
        sim = started(seed=seed, drop_rate=0.05)
        for i in range(10):
            sim.command(("add", i), i)
        sim.partition(["n1"], ["n2", "n3"])
        sim.run_for(8_000)
        sim.heal()
        sim.run_for(5_000)
        return snapshot(sim)

    assert run(5) == run(5)


def test_minority_leader_loses_its_uncommitted_entries_after_a_partition() -> None:
    sim = started(seed=2)
    old = sim.leader()
    assert old is not None
    sim.partition([old[1]], [n for n in NODES if n != old[1]])
    sim.command(("add", 1000), "lost", to=old)  # the old leader cannot commit this
    sim.run_for(10_000)
    new = sim.leader()
    assert new is not None and new != old
    sim.command(("add", 1), "kept", to=new)
    sim.run_for(1_000)
    sim.heal()
    sim.run_for(5_000)
    assert sim.leader() == new
    assert [s.state.machine_state for s in sim.servers.values()] == [1, 1, 1]
    assert ("kept", 1) in sim.notified and all(c != "lost" for c, _ in sim.notified)
    sim.check_log_matching()


def test_pre_vote_keeps_an_isolated_member_from_deposing_a_healthy_leader() -> None:
    sim = started(seed=4)
    lead = sim.leader()
    assert lead is not None
    term = sim.servers[lead].state.current_term
    lonely = next(s for s in sim.ids if s != lead)
    sim.partition([lonely[1]], [n for n in NODES if n != lonely[1]])
    for i in range(5):  # the healthy majority keeps committing
        sim.command(("add", i), i)
    sim.run_for(20_000)  # the isolated member keeps canvassing pre-votes meanwhile
    assert sim.servers[lonely].role in ("pre_vote", "follower")
    assert sim.servers[lonely].state.current_term == term  # pre-votes never bump the term
    sim.heal()
    sim.run_for(10_000)
    # its log is behind, so no up-to-date member pre-votes for it: the leader stays
    assert sim.leader() == lead
    assert {s.state.current_term for s in sim.servers.values()} == {term}
    assert sim.servers[lonely].role == "follower"
    assert sim.servers[lonely].state.machine_state == 10


def test_without_new_writes_a_rejoining_member_can_win_the_pre_vote_race() -> None:
    # Ra's pre-vote has no "heard from a leader recently" check: an equally
    # up-to-date member that rejoins an idle cluster races the leader's AERs.
    outcomes = set()
    for seed in range(12):
        sim = started(seed=seed)
        lead = sim.leader()
        assert lead is not None
        lonely = next(s for s in sim.ids if s != lead)
        sim.partition([lonely[1]], [n for n in NODES if n != lonely[1]])
        sim.run_for(20_000)
        sim.heal()
        sim.run_for(10_000)
        outcomes.add(sim.leader() == lead)
    assert outcomes == {True, False}


ops = st.lists(
    st.one_of(
        st.tuples(st.just("cmd"), st.integers(1, 9)),
        st.tuples(st.just("run"), st.integers(50, 3_000)),
        st.tuples(st.just("partition"), st.permutations(NODES), st.integers(1, 2)),
        st.tuples(st.just("heal")),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), drop=st.sampled_from([0.0, 0.05, 0.3]), schedule=ops)
def test_drops_and_partitions_never_violate_safety(
    seed: int, drop: float, schedule: list[tuple[object, ...]]
) -> None:
    sim = Sim(seed=seed, drop_rate=drop)
    sim.trigger_election(sim.ids[seed % 3])
    corr = 0
    for op in schedule:  # Sim raises SafetyViolation on two leaders or diverging applies
        match op:
            case ("cmd", n):
                corr += 1
                sim.command(("add", n), corr)
            case ("run", ms):
                sim.run_for(int(ms))  # type: ignore[call-overload]
            case ("partition", order, cut):
                nodes = list(order)  # type: ignore[call-overload]
                sim.partition(nodes[:cut], nodes[cut:])
            case ("heal",):
                sim.heal()
    sim.heal()
    sim.drop_rate = 0.0
    sim.run_for(15_000)
    sim.check_log_matching()
    # once healed, a leader that commits anything brings every member to the same state
    lead = sim.leader()
    if lead is not None:
        sim.command(("add", 0), "final", to=lead)
        # a follower parked in catch-up whose reply was dropped re-sends it only
        # when await_condition_timeout (30 s) expires
        sim.run_for(35_000)
        states = {(s.state.last_applied, s.state.machine_state) for s in sim.servers.values()}
        assert len(states) == 1, states


def test_the_safety_checks_catch_two_leaders_in_a_term() -> None:
    sim = started(seed=1)
    term = max(sim.leaders)
    sim.leaders[term].add(sim.ids[2])
    with pytest.raises(SafetyViolation, match="two leaders"):
        sim.run_for(2_000)  # any event re-runs the checks


def test_the_safety_checks_catch_members_applying_different_entries() -> None:
    sim = started(seed=1)
    sim.applied[1] = (99, "something else")
    sim._applied_upto = dict.fromkeys(sim.ids, 0)
    sim.command(("add", 1), 1)
    with pytest.raises(SafetyViolation, match="applied"):
        sim.run_for(2_000)


def test_log_matching_check_detects_divergent_prefixes() -> None:
    sim = started(seed=1)
    sim.command(("add", 1), 1)
    sim.run_for(2_000)
    victim = sim.servers[sim.ids[2]].state.log
    victim._entries[1] = (1, victim._entries[1][1], "tampered")
    with pytest.raises(SafetyViolation, match="diverge"):
        sim.check_log_matching()


@pytest.mark.parametrize("seed", [4, 9, 23])
def test_a_partitioned_follower_catches_up_by_snapshot(seed: int) -> None:
    from ra.sim import SnapshottingCounter

    # a tiny chunk size makes the snapshot travel in several install_snapshot_rpc calls
    sim = Sim(seed=seed, machine=SnapshottingCounter(every=5), min_snapshot_interval=8,
              snapshot_chunk_size=4)
    sim.trigger_election(sim.ids[0])
    lead = sim.run_until_leader()
    assert lead is not None
    lagging = next(sid for sid in sim.ids if sid != lead)
    others = [sid[1] for sid in sim.ids if sid != lagging]
    sim.partition(others, [lagging[1]])
    for i in range(1, 61):
        sim.command(("add", i), i, to=lead)
        sim.run_for(20)
    sim.run_for(2_000)
    for sid in sim.ids:
        if sid != lagging:
            snap = sim.servers[sid].state.log.snapshot_index_term()
            assert snap is not None and sim.servers[sid].state.log.first_index() > 1
    sim.heal()
    sim.run_for(15_000)
    assert any(peer == lagging for peer, _ in sim.installs)
    total = sum(range(1, 61))
    assert {s.state.machine_state for s in sim.servers.values()} == {total}
    assert sim.servers[lagging].state.log.snapshot_index_term() is not None
    sim.check_log_matching()


class KeepingCounter:
    """Adds integers, and keeps the raft index of every multiple of 7 it was given:
    those entries are its live indexes. It releases its log every 5 entries."""

    def init(self, config: dict[str, object]) -> dict[int, int]:
        return {}

    def apply(self, meta: dict[str, object], command: tuple[str, int],
              state: dict[int, int]) -> tuple[object, ...]:
        idx = int(meta["index"])  # type: ignore[call-overload]
        n = command[1]
        if n % 7 == 0:
            state = {**state, n: idx}
        effects = [("release_cursor", idx, state)] if idx % 5 == 0 else []
        return (state, n, effects)

    def live_indexes(self, state: dict[int, int]) -> list[int]:
        return sorted(state.values())


@pytest.mark.parametrize("seed", [4, 9, 23])
def test_a_partitioned_follower_gets_the_live_entries_with_the_snapshot(seed: int) -> None:
    sim = Sim(seed=seed, machine=KeepingCounter(), min_snapshot_interval=8,
              snapshot_chunk_size=4)
    sim.trigger_election(sim.ids[0])
    lead = sim.run_until_leader()
    assert lead is not None
    lagging = next(sid for sid in sim.ids if sid != lead)
    sim.partition([sid[1] for sid in sim.ids if sid != lagging], [lagging[1]])
    for i in range(1, 61):
        sim.command(("add", i), i, to=lead)
        sim.run_for(20)
    sim.run_for(2_000)
    sim.heal()
    sim.run_for(15_000)
    assert any(peer == lagging for peer, _ in sim.installs)
    kept = sim.servers[lead].state.machine_state
    assert sorted(kept) == [7, 14, 21, 28, 35, 42, 49, 56]
    for s in sim.servers.values():
        log = s.state.log
        snap = log.snapshot_index_term()
        assert snap is not None and snap[0] > max(kept.values())
        entries = log.sparse_read(kept.values())
        assert [e[2][2] for e in entries] == [("add", n) for n in sorted(kept)]
