"""Effect executors run every effect the core emits and refuse the ones they do not know.

The Ra process shell and the simulator each carry out effects; an effect that
neither knows is a bug in whoever emitted it, so it raises instead of being
dropped.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ra import proc_effects
from ra.effect_types import (
    Aux,
    CancelSnapshotRetryTimer,
    SendMsg,
    StartSnapshotRetryTimer,
    UnknownEffect,
)
from ra.effects import executes
from ra.sim import CounterMachine, Sim
from ra.statem import CAST


def test_an_effect_record_is_the_tuple_a_trace_shows() -> None:
    assert SendMsg("send_msg", "pid", "m") == ("send_msg", "pid", "m")
    assert hash(Aux("aux", "tick")) == hash(("aux", "tick"))


@pytest.mark.parametrize("effect", [("no_such_effect", 1), "no_such_atom", (), ("send_msg",)])
def test_deciding_who_executes_an_unknown_effect_raises(effect: Any) -> None:
    with pytest.raises(UnknownEffect):
        executes(effect, "leader", "n1", "voter", {"n1"})


def test_the_process_shell_raises_on_an_effect_it_does_not_know() -> None:
    proc: Any = SimpleNamespace(s=None)
    with pytest.raises(UnknownEffect):
        proc_effects._run_one(proc, ("no_such_effect", 1), CAST, [])


def _delivered(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    deliver = sim._deliver

    def record(srv: Any, msg: Any, evtype: Any) -> None:
        seen.append((srv.sid, msg))
        deliver(srv, msg, evtype)

    monkeypatch.setattr(sim, "_deliver", record)
    return seen


def test_the_simulator_cancels_a_snapshot_retry_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = Sim(seed=1)
    srv = sim.servers[sim.ids[0]]
    peer = sim.ids[1]
    seen = _delivered(sim, monkeypatch)
    sim._run_effects(srv, [StartSnapshotRetryTimer("start_snapshot_retry_timer", peer, 10),
                           CancelSnapshotRetryTimer("cancel_snapshot_retry_timer", peer)], CAST)
    sim.run_for(100)
    assert (srv.sid, ("snapshot_retry_timeout", peer)) not in seen


def test_the_simulator_fires_a_snapshot_retry_timer_left_armed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = Sim(seed=1)
    srv = sim.servers[sim.ids[0]]
    peer = sim.ids[1]
    seen = _delivered(sim, monkeypatch)
    sim._run_effects(srv, [StartSnapshotRetryTimer("start_snapshot_retry_timer", peer, 10)], CAST)
    sim.run_for(100)
    assert (srv.sid, ("snapshot_retry_timeout", peer)) in seen


class AuxCounter(CounterMachine):
    def handle_aux(self, *args: Any) -> Any:
        return ("no_reply", None, args[-1])


def test_the_simulator_refuses_aux_effects_it_cannot_run() -> None:
    sim = Sim(seed=1, machine=AuxCounter())
    srv = sim.servers[sim.ids[0]]
    with pytest.raises(NotImplementedError, match="aux"):
        sim._run_effects(srv, [Aux("aux", "eval")], CAST)


def test_aux_effects_for_a_machine_without_aux_do_nothing_in_the_simulator() -> None:
    sim = Sim(seed=1)
    srv = sim.servers[sim.ids[0]]
    assert sim._run_effects(srv, [Aux("aux", "tick")], CAST) == []


def test_the_simulator_raises_on_an_effect_it_does_not_know() -> None:
    sim = Sim(seed=1)
    srv = sim.servers[sim.ids[0]]
    with pytest.raises(UnknownEffect):
        sim._run_effects(srv, [("no_such_effect", 1)], CAST)


@pytest.mark.parametrize("effect", [("mod_call", "m", "f", []), ("timer", "t", 10),
                                    ("append", "cmd"), "garbage_collection"])
def test_the_simulator_refuses_machine_effects_it_does_not_execute(effect: Any) -> None:
    sim = Sim(seed=1)
    srv = sim.servers[sim.ids[0]]
    srv.role = "leader"
    with pytest.raises(NotImplementedError, match=r"ra\.sim does not execute"):
        sim._run_effects(srv, [effect], CAST)
