"""Identities (pids, refs), exit reasons and the exceptions that carry them.

Erlang terms become small immutable Python values here so that they hash,
order, pickle and pattern-match (`match`) the same on every node. A pid from
an earlier life of a node (another `creation`) is a different value, which is
how a restarted node makes its old pids dead.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from actors.wire import wire_record

__all__ = [
    "CallExit",
    "NoSuchName",
    "Pid",
    "ProcessExit",
    "Ref",
    "exception_reason",
    "is_clean_reason",
]


@wire_record  # pickled as its constructor call: three times cheaper than the default
@dataclass(frozen=True, order=True, slots=True)
class Pid:
    """A process identifier: never reused within one node incarnation."""

    node: str
    serial: int
    creation: int

    def __repr__(self) -> str:
        return f"<{self.node}.{self.serial}.{self.creation}>"


@wire_record
@dataclass(frozen=True, order=True, slots=True)
class Ref:
    """A reference unique per node incarnation (monitors, timers, call tags)."""

    node: str
    creation: int
    n: int

    def __repr__(self) -> str:
        return f"#Ref<{self.node}.{self.n}.{self.creation}>"


def is_clean_reason(reason: Any) -> bool:
    """Whether a supervisor or a crash logger treats `reason` as a clean exit.

    This is the *supervisor* notion of normal; for link propagation only
    ``"normal"`` is harmless (see `actors.process`).
    """
    if reason == "normal" or reason == "shutdown":
        return True
    return isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown"


def exception_reason(exc: BaseException) -> tuple[str, str, str, str]:
    """The picklable exit reason for a runtime error: never the exception object."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ("exception", type(exc).__qualname__, str(exc), tb)


class NoSuchName(Exception):
    """Raised by `send` to an unregistered local name (Erlang's `badarg`)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no process registered as {name!r}")
        self.name = name


class ProcessExit(BaseException):
    """Unwinds a process that is exiting with `reason`.

    A BaseException so that ordinary ``except Exception`` blocks in user code
    do not swallow an exit; the process loop catches it and never lets it reach
    pykka (which would stop every actor in the OS process).
    """

    def __init__(self, reason: Any) -> None:
        super().__init__(reason)
        self.reason = reason


class CallExit(ProcessExit):
    """A failed `call`: uncaught, the caller exits with `reason`.

    ``reason`` is ``(Reason, ("gen_server", "call", [server, request, timeout]))``
    as `gen_server:call/3` exits; `.why` is the inner `Reason` alone.
    """

    def __init__(self, reason: Any) -> None:
        super().__init__(reason)

    @property
    def why(self) -> Any:
        r = self.reason
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[1], tuple):
            return r[0]
        return r
