"""The aux state machine on three nodes: per member, not
replicated; reached by calls and casts, ``eval`` after commit (leader) or
apply (follower), ``tick``, and the effects its handler returns, executed by
the rules of every other effect."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import actors
from ra import api
from ra import aux as ra_aux
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


@dataclass
class Aux:
    name: str
    evals: int = 0
    ticks: int = 0
    notes: list[Any] = field(default_factory=list)
    downs: list[Any] = field(default_factory=list)


class AuxMachine(SeqMachine):
    """A sequence machine with an aux handler that counts what it is sent."""

    def init_aux(self, name: str) -> Aux:
        return Aux(name)

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: Aux,
                   int_state: Any) -> tuple[Any, ...]:
        match cmd:
            case "eval":
                aux.evals += 1
            case "tick":
                aux.ticks += 1
            case ("note", what):
                aux.notes.append(what)
            case ("down", pid, reason):
                aux.downs.append((pid, reason))
            case "get":
                view = (ra_state, aux.name, list(aux.notes), ra_aux.last_applied(int_state),
                        ra_aux.machine_state(int_state))
                return ("reply", view, aux, int_state)
            case "counts":
                return ("reply", (aux.evals, aux.ticks), aux, int_state)
            case ("tell", pid, msg):
                return ("reply", "told", aux, int_state, [("send_msg", pid, ("aux_says", msg))])
            case ("watch", pid):
                return ("no_reply", aux, int_state, [("monitor", "process", "aux", pid)])
            case ("append", command):
                return ("reply", "appending", aux, int_state, [("append", command)])
            case "downs":
                return ("reply", list(aux.downs), aux, int_state)
        return ("no_reply", aux, int_state)


def start(c: Cluster, machine: Any) -> tuple[str, str]:
    result = api.start_cluster("default", "aux", machine, c.ids, server_config=SERVER_CONFIG)
    assert result[0] == "ok", result
    return leader_of(c.ids)


def test_aux_state_is_per_member_and_not_replicated(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, AuxMachine())
        follower = next(sid for sid in cluster.ids if sid != leader)
        assert api.process_command(leader, ("push", 1))[0] == "ok"
        api.cast_aux_command(follower, ("note", "only here"))
        state, name, notes, _, _ = api.aux_command(follower, "get")
        assert (state, name, notes) == ("follower", follower[0], ["only here"])
        state, name, notes, applied, mac = api.aux_command(leader, "get")
        assert (state, name, notes) == ("leader", leader[0], [])
        # the handler reads the server through ra.aux
        assert applied == overview(leader)["last_applied"] and mac == (1, (1,))


def test_eval_follows_commit_on_the_leader_and_apply_on_followers_and_tick_comes_too(
    cluster: Cluster,
) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, AuxMachine())
        before = {sid: api.aux_command(sid, "counts")[0] for sid in cluster.ids}
        for seq in range(3):
            assert api.process_command(leader, ("push", seq))[0] == "ok"
        for sid in cluster.ids:
            wait_until(lambda sid=sid: api.aux_command(sid, "counts")[0] > before[sid],
                       what=f"{sid} evaluates its aux after new entries")
            # ticks arrive every tick_timeout (100 ms here), on leader and followers
            wait_until(lambda sid=sid: api.aux_command(sid, "counts")[1] >= 2,
                       what=f"{sid} ticks its aux")


def test_aux_effects_follow_the_effect_rules(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        me = actors.self()
        leader = start(cluster, AuxMachine())
        follower = next(sid for sid in cluster.ids if sid != leader)
        # send_msg is executed by the leader only
        assert api.aux_command(follower, ("tell", me, "from follower")) == "told"
        assert api.aux_command(leader, ("tell", me, "from leader")) == "told"
        assert actors.receive(5000) == ("aux_says", "from leader")
        assert actors.receive(200) is actors.TIMEOUT
        # an append effect from the leader's aux handler becomes a command
        assert api.aux_command(leader, ("append", ("push", 42))) == "appending"
        wait_until(lambda: api.local_query(leader, lambda s: s[0])[1][1] == 42,
                   what="the appended command to be applied")


def test_aux_monitors_report_down_to_the_aux_handler_of_every_member(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, AuxMachine())
        follower = next(sid for sid in cluster.ids if sid != leader)
        watched = actors.spawn(lambda: actors.receive())
        api.cast_aux_command(follower, ("watch", watched))
        assert api.aux_command(follower, "downs") == []
        actors.exit(watched, "kill")
        wait_until(lambda: api.aux_command(follower, "downs") == [(watched, "killed")],
                   what="the follower's aux handler told of the DOWN")
        assert api.aux_command(leader, "downs") == []


def test_aux_state_is_initialised_again_after_a_restart(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, AuxMachine())
        follower = next(sid for sid in cluster.ids if sid != leader)
        api.cast_aux_command(follower, ("note", "before"))
        assert api.aux_command(follower, "get")[2] == ["before"]
        assert api.stop_server("default", follower) == "ok"
        assert api.restart_server("default", follower) == "ok"
        assert api.aux_command(follower, "get")[2] == []


def test_a_machine_without_an_aux_handler_refuses_aux_calls(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, SeqMachine())
        assert api.aux_command(leader, "anything") == ("error", "aux_handler_not_implemented")
        api.cast_aux_command(leader, "anything")  # a cast is dropped
        assert api.ping(leader) == ("pong", "leader")


def test_consistent_aux_runs_on_the_confirmed_leader_with_a_wrapped_reply(
    cluster: Cluster,
) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, AuxMachine())
        follower = next(sid for sid in cluster.ids if sid != leader)
        assert api.process_command(leader, ("push", 1))[0] == "ok"
        # asked through a follower, it is the leader's aux handler that answers
        ok, view, who = api.consistent_aux(follower, "get")
        assert (ok, who) == ("ok", leader)
        assert view[:2] == ("leader", leader[0]) and view[4] == (1, (1,))
        assert api.consistent_aux([follower, leader], ("tell", actors.self(), "hi"))[:2] == (
            "ok", "told")
        assert actors.receive(2000) == ("aux_says", "hi")


class LegacyAuxMachine(SeqMachine):
    """The older six-argument ``handle_aux``: it is given the log and the
    machine state, and hands the log back."""

    def init_aux(self, name: str) -> list[Any]:
        return []

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: list[Any], log: Any,
                   mac_state: Any) -> tuple[Any, ...]:
        match cmd:
            case "view":
                return ("reply", (ra_state, mac_state, log.last_index_term()[0], list(aux)),
                        aux, log)
            case ("note", what):
                return ("no_reply", [*aux, what], log)
        return ("no_reply", aux, log)


def test_the_legacy_six_argument_handle_aux_gets_the_log_and_machine_state(
    cluster: Cluster,
) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, LegacyAuxMachine())
        assert api.process_command(leader, ("push", 4))[0] == "ok"
        api.cast_aux_command(leader, ("note", "x"))
        state, mac, last_index, notes = api.aux_command(leader, "view")
        assert (state, mac, notes) == ("leader", (4, (4,)), ["x"])
        assert last_index == overview(leader)["last_index"]
