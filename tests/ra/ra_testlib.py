"""Builders shared by the Ra core tests: servers in a given state, entries, peers."""

from __future__ import annotations

import random
from typing import Any

from ra.log import MemoryLog
from ra.replication import initialise_peers
from ra.sim import CounterMachine
from ra.state import ServerState, init
from ra.types import Entry, usr

S1 = ("s1", "n1")
S2 = ("s2", "n2")
S3 = ("s3", "n3")
MEMBERS = [S1, S2, S3]


def cmd(data: Any, mode: Any = "noreply", ts: int = 0, **meta: Any) -> tuple[Any, ...]:
    return usr({"ts": ts, **meta}, data, mode)


def entry(idx: int, term: int, data: Any = None) -> Entry:
    return (idx, term, cmd(("add", idx) if data is None else data))


def entries(*terms: int, first: int = 1) -> list[Entry]:
    """Entries ``first, first+1, ...`` with the given terms."""
    return [entry(first + i, t) for i, t in enumerate(terms)]


def server(
    sid: Any = S1,
    members: Any = None,
    log: list[Entry] | None = None,
    written: int | None = None,
    term: int = 0,
    machine: Any = None,
    **config: Any,
) -> ServerState:
    """A server whose log holds `log`, written up to `written` (default: all)."""
    mlog = MemoryLog(log or [], written_upto=written)
    mlog.take_wal_writes()
    st = init({
        "id": sid,
        "initial_members": MEMBERS if members is None else members,
        "machine": machine or CounterMachine(),
        "log": mlog,
        "rng": random.Random(7),
        "current_term": term,
        **config,
    })
    return st


def leader(
    sid: Any = S1, members: Any = None, log: list[Entry] | None = None,
    term: int = 1, written: int | None = None, **config: Any,
) -> ServerState:
    """A freshly elected leader (peers initialised, noop not yet appended)."""
    st = server(sid, members, log, written, term, **config)
    st.leader_id = st.id
    st.voted_for = st.id
    initialise_peers(st)
    return st


def rpcs(effects: list[Any]) -> dict[Any, Any]:
    """``send_rpc`` effects by destination."""
    return {e[1]: e[2] for e in effects if isinstance(e, tuple) and e[0] == "send_rpc"}


def casts(effects: list[Any]) -> list[tuple[Any, Any]]:
    return [(e[1], e[2]) for e in effects if isinstance(e, tuple) and e[0] == "cast"]


def of_tag(effects: list[Any], tag: str) -> list[Any]:
    return [e for e in effects if isinstance(e, tuple) and e and e[0] == tag]
