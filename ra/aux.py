"""``ra_aux``: what an aux handler may read of its server (docs/ra.md, Aux state machine).

`handle_aux` receives the server's internal state as an opaque value; these
accessors are the only supported way to look into it, so a machine's aux
code does not depend on how the core keeps its state.
"""

from __future__ import annotations

from typing import Any

from ra.state import ServerState
from ra.types import USR, IdxTerm, ServerId


def machine_state(s: ServerState) -> Any:
    return s.machine_state


def leader_id(s: ServerState) -> ServerId | None:
    return s.leader_id


def last_applied(s: ServerState) -> int:
    return s.last_applied


def current_term(s: ServerState) -> int:
    return s.current_term


def members(s: ServerState) -> list[ServerId]:
    return list(s.cluster)


def effective_machine_version(s: ServerState) -> int:
    return s.cfg.effective_machine_version


def log_last_index_term(s: ServerState) -> IdxTerm:
    return s.log.last_index_term()


def log_fetch(idx: int, s: ServerState) -> Any:
    """The user command at `idx`, or None if the entry is gone or not a user command."""
    entry = s.log.fetch(idx)
    if entry is None or not (isinstance(entry[2], tuple) and entry[2][0] == USR):
        return None
    return entry[2][2]
