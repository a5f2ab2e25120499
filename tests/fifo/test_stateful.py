"""Property test: the machine against a plain reference of who holds which message.

Checked after every command: nothing enqueued-and-accepted is lost (each
accepted message is ready, checked out to exactly the consumer the model
expects, settled, or dead-lettered), nothing is delivered twice without a
give-back in between, per-consumer msg ids go up by one, and messages that were
never given back reach each consumer in enqueue order. Machines 7 and 8 both.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fifo import make_checkout, make_discard, make_return, make_settle
from fifo.delivery import messages_ready, messages_total
from fifo.msg import msg_idx, msg_size

from .helpers import Driver, P, ReadPlan

PUBLISHERS = [P("n1", 1), P("n2", 2)]
CONSUMER_PIDS = [P("n1", 10), P("n2", 11), P("n1", 12)]


class FifoModel(RuleBasedStateMachine):
    @initialize(limit=st.sampled_from([None, 1, 3]), max_length=st.sampled_from([None, 4, 8]),
                version=st.sampled_from([7, 8]))
    def setup(self, limit: int | None, max_length: int | None, version: int) -> None:
        self.d = Driver(machine_version=version, delivery_limit=limit, max_length=max_length,
                        dead_letter_handler=("at_most_once", ("m", "f", [])))
        self.next_seq = dict.fromkeys(PUBLISHERS, 1)
        self.accepted: list[int] = []
        self.settled: set[int] = set()
        self.dead: set[int] = set()
        self.owner: dict[int, Any] = {}  # idx -> consumer key
        self.by_msg_id: dict[tuple[Any, int], int] = {}  # (key, msg_id) -> idx
        self.ever_returned: set[int] = set()
        self.last_msg_id: dict[Any, int] = {}
        self.last_fresh_idx: dict[Any, int] = {}
        self.keys: dict[Any, tuple[str, Any]] = {}  # key -> consumer id

    # --- effects --------------------------------------------------------------------------

    def _absorb(self, effects: list[Any]) -> None:
        for e in effects:
            if e[0] == "log_ext":
                _, idxs, fun, (_, node) = e
                for send in fun(ReadPlan(node, self.d.log, idxs)):
                    _, _tag, _plan, msgs = send[2]
                    key = self._key_for(send[1], _tag)
                    for msg_id, ref in msgs:  # machine 8 sends packed references
                        self._delivered(key, msg_id, msg_idx(ref))
            elif e[0] == "send_msg" and isinstance(e[2], tuple) and e[2][0] == "delivery":
                key = self._key_for(e[1], e[2][1])
                for msg_id, _ in e[2][2]:
                    idx = msg_idx(self.d.state.consumers[key].checked_out[msg_id])
                    self._delivered(key, msg_id, idx)
            elif e[0] == "log":
                self.dead.update(e[1])  # at-most-once dead letters

    def _key_for(self, pid: Any, tag: str) -> Any:
        for key, cid in self.keys.items():
            if cid == (tag, pid) and key in self.d.state.consumers:
                return key
        raise AssertionError(f"delivery to unknown consumer {(tag, pid)}")

    def _delivered(self, key: Any, msg_id: int, idx: int) -> None:
        assert idx not in self.owner, f"{idx} delivered twice without a return"
        assert msg_id == self.last_msg_id.get(key, -1) + 1
        self.last_msg_id[key] = msg_id
        if idx not in self.ever_returned:
            assert idx > self.last_fresh_idx.get(key, 0), "fresh messages out of order"
            self.last_fresh_idx[key] = idx
        self.owner[idx] = key
        self.by_msg_id[(key, msg_id)] = idx

    def _apply(self, cmd: Any) -> Any:
        reply, effects = self.d.apply(cmd)
        self._absorb(effects)
        return reply

    def _owned(self, key: Any) -> list[int]:
        return sorted(mid for (k, mid) in self.by_msg_id if k == key)

    # --- rules -----------------------------------------------------------------------------

    @rule(p=st.sampled_from(PUBLISHERS), shift=st.sampled_from([0, 0, 0, 0, -1, 1]))
    def enqueue(self, p: P, shift: int) -> None:
        seq = self.next_seq[p] + shift
        reply, effects = self.d.enqueue(p, seq, b"x" * (1 + self.d.index % 3))
        if shift == 0:
            assert reply == "ok"
            self.accepted.append(self.d.index)
            self.next_seq[p] += 1
        else:
            assert reply == ("ok" if shift < 0 else "not_enqueued")
        self._absorb(effects)

    @rule(cpid=st.sampled_from(CONSUMER_PIDS), prefetch=st.integers(1, 3))
    def consume(self, cpid: P, prefetch: int) -> None:
        cid = ("t", cpid)
        reply, effects = self.d.apply(make_checkout(cid, ("auto", ("simple_prefetch", prefetch)),
                                                    {}))
        self.keys[reply[1]["key"]] = cid
        self._absorb(effects)

    def _pick(self, data: st.DataObject) -> tuple[Any, list[int]] | None:
        keys = [k for k in self.d.state.consumers if self._owned(k)]
        if not keys:
            return None
        key = data.draw(st.sampled_from(sorted(keys)))
        ids = data.draw(st.lists(st.sampled_from(self._owned(key)), min_size=1, unique=True))
        return key, ids

    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        key, ids = picked
        for mid in ids:
            idx = self.by_msg_id.pop((key, mid))
            del self.owner[idx]
            self.settled.add(idx)
        self._apply(make_settle(key, ids))

    @rule(data=st.data(), discard=st.booleans())
    def give_back(self, data: st.DataObject, discard: bool) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        key, ids = picked
        for mid in ids:
            idx = self.by_msg_id.pop((key, mid))
            del self.owner[idx]
            self.ever_returned.add(idx)
        self._apply((make_discard if discard else make_return)(key, ids))

    @rule(cpid=st.sampled_from(CONSUMER_PIDS), how=st.sampled_from(["cancel", "remove"]))
    def cancel(self, cpid: P, how: str) -> None:
        cid = ("t", cpid)
        if how == "remove":
            self._release(lambda k: self.keys.get(k) == cid)
        self._apply(make_checkout(cid, how, {}))

    @rule(cpid=st.sampled_from(CONSUMER_PIDS))
    def down(self, cpid: P) -> None:
        self._release(lambda k: self.keys.get(k, (None, None))[1] == cpid)
        self._apply(("down", cpid, "noproc"))

    def _release(self, pred: Any) -> None:
        for (k, mid), idx in list(self.by_msg_id.items()):
            if pred(k) and k in self.d.state.consumers:
                del self.by_msg_id[(k, mid)]
                del self.owner[idx]
                self.ever_returned.add(idx)

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def nothing_is_lost(self) -> None:
        s = self.d.state
        ready = {msg_idx(m) for m in s.returns} | {msg_idx(m) for m in s.messages.drain_order()}
        held = {msg_idx(m): k for k, c in s.consumers.items() for m in c.checked_out.values()}
        assert held == self.owner
        assert {(k, mid): msg_idx(m) for k, c in s.consumers.items()
                for mid, m in c.checked_out.items()} == self.by_msg_id
        alive = set(self.accepted) - self.settled - self.dead
        assert ready | set(held) == alive
        assert not ready & set(held)
        assert messages_ready(s) + len(held) == messages_total(s) == len(alive)
        assert s.msg_bytes_enqueue == sum(msg_size(m) for m in s.returns) + \
            sum(msg_size(m) for m in s.messages.drain_order())
        assert s.msg_bytes_checkout == sum(msg_size(m) for c in s.consumers.values()
                                           for m in c.checked_out.values())

    @invariant()
    def credit_is_bounded(self) -> None:
        for c in self.d.state.consumers.values():
            assert 0 <= c.credit <= c.cfg.credit_mode[1]


FifoModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestFifoModel = FifoModel.TestCase
