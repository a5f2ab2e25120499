"""Every restart a node's supervisors make is counted, whether or not a history is
recorded: the count is what the node's metrics report as supervisor restarts."""

from __future__ import annotations

import actors
import supervision as supervisor
from actors import gen_server
from supervision import reports

from .sup_helpers import down_of, events, expect
from .sup_workers import StaticSup, worker_spec


def test_each_restart_is_counted_for_its_supervisor(me) -> None:
    ok, sup = supervisor.start_link(StaticSup, ({"intensity": 10}, [worker_spec(me.pid, "p")]),
                                    name="counting_sup")
    assert ok == "ok", sup
    events("started", 1)
    before = reports.restart_totals(actors.node()).get("counting_sup", 0)
    for _ in range(2):
        pid = next(p for c, p, _t, _m in supervisor.which_children(sup) if c == "p")
        actors.monitor(pid)
        gen_server.cast(pid, ("stop", "boom"))
        expect(down_of(pid))
        events("started", 1)
    assert reports.restart_totals(actors.node())["counting_sup"] == before + 2
