"""Test doubles and a small driver for the pure machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fifo import RabbitFifo, RabbitFifoState, make_checkout, make_enqueue
from fifo.commands import get_msg

QNAME = ("resource", "/", "queue", "q1")


@dataclass(frozen=True, order=True)
class P:
    """A pid double: only ``node`` matters to the machine."""

    node: str
    n: int

    def __repr__(self) -> str:
        return f"<{self.node}.{self.n}>"


N1 = "n1@host"
N2 = "n2@host"


def pid(n: int, node: str = N1) -> P:
    return P(node, n)


class ReadPlan:
    """Stands in for a Ra read plan executed on `node` against `log`."""

    def __init__(self, node: str, log: dict[int, Any], idxs: list[int]) -> None:
        self.node = node
        self._log = log
        self._idxs = idxs

    def execute(self) -> dict[int, Any]:
        return {i: self._log[i] for i in self._idxs if i in self._log}


class Driver:
    """Applies commands with increasing raft indexes and remembers the log."""

    def __init__(self, machine_version: int = 7, **config: Any) -> None:
        self.machine = RabbitFifo(machine_version)
        self.state: RabbitFifoState = self.machine.init(
            {"name": "q1", "queue_resource": QNAME, **config})
        self.index = 0
        self.ts = 1000
        self.log: dict[int, Any] = {}

    def meta(self, **kw: Any) -> dict[str, Any]:
        return {"index": self.index, "term": 1, "system_time": self.ts,
                "machine_version": self.machine.machine_version, **kw}

    def apply(self, cmd: Any, *, ts: int | None = None, **meta_kw: Any) -> tuple[Any, list[Any]]:
        self.index += 1
        if ts is not None:
            self.ts = ts
        self.log[self.index] = cmd
        res = self.machine.apply(self.meta(**meta_kw), cmd, self.state)
        self.state = res[0]
        return res[1], (res[2] if len(res) == 3 else [])

    def enqueue(self, p: Any, seq: int, msg: Any, **kw: Any) -> tuple[Any, list[Any]]:
        # machine 2's clients send the ``enqueue`` record, later ones the compact ``e``
        cmd = make_enqueue(p, seq, msg, compact=self.machine.machine_version > 2)
        return self.apply(cmd, reply_mode=("notify", seq, p), **kw)

    def read(self, effect: Any, on_node: str | None = None) -> list[Any]:
        """Run a ``log``/``log_ext`` effect's callback as Ra would."""
        match effect:
            case ("log_ext", idxs, fun, ("local", node)):
                return fun(ReadPlan(on_node or node, self.log, idxs))
            case ("log", idxs, fun):
                return fun([self.log[i] for i in idxs if i in self.log])
        raise AssertionError(f"not a log effect: {effect!r}")


class FakeRaAux:
    """What a machine's aux handler may read of its Ra server, over a `Driver`."""

    def __init__(self, d: Driver) -> None:
        self.d = d

    def machine_state(self) -> Any:
        return self.d.state

    def last_applied(self) -> int:
        return self.d.index

    def log_fetch(self, idx: int) -> Any:
        return self.d.log.get(idx)


def queue_of(v: int, n: int, publisher: P, **cfg: Any) -> Driver:
    """A machine-`v` queue holding `n` messages ``m0``.. from `publisher`, in order."""
    d = Driver(machine_version=v, **cfg)
    for i in range(n):
        d.enqueue(publisher, i + 1, f"m{i}".encode())
    return d


def consume(d: Driver, c: Any, prefetch: int, **cmeta: Any) -> int:
    """A prefetch consumer of `c` (tag ``ct``), as a machine 3+ client checks out; its key."""
    d.apply(make_checkout(("ct", c), ("auto", ("simple_prefetch", prefetch)), cmeta))
    return d.index


def deliveries(d: Driver, effects: list[Any]) -> list[tuple[Any, Any, list[tuple[int, Any]]]]:
    """Every delivery in `effects` as ``(pid, ctag, [(msg_id, body)])``, in order."""
    out = []
    for e in effects:
        sends: list[Any] = []
        if e[0] == "send_msg":
            sends = [e]
        elif e[0] == "log_ext":
            sends = d.read(e, on_node="elsewhere")
        for s in sends:
            if s[2][0] == "delivery":
                out.append((s[1], s[2][1], [(mid, body) for mid, (_h, body) in s[2][2]]))
    return out


def delivered_ids(d: Driver, effects: list[Any]) -> list[int]:
    return [mid for _, _, msgs in deliveries(d, effects) for mid, _ in msgs]


def bodies(d: Driver, effects: list[Any]) -> list[Any]:
    return [b for _, _, msgs in deliveries(d, effects) for _, b in msgs]


__all__ = ["N1", "N2", "QNAME", "Driver", "FakeRaAux", "P", "bodies", "consume",
           "delivered_ids", "deliveries", "get_msg", "pid", "queue_of"]
