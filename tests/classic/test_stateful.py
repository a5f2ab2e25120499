"""Property test: the classic queue core against a plain reference model.

The model keeps, for every message, where it is: ready, unacked on a channel
(with the consumer that got it), or gone. After every command the core's
effects are replayed against the model, which checks that every delivery and
every dropped message is the head of the ready messages in priority-then-enqueue
order, that nothing is delivered twice without a return in between, that the
``redelivered`` flag is set exactly for messages delivered before, that every
confirm comes once and never before a persistent message is written or gone,
that prefetch and single-active-consumer rules hold, that no consumer with room
sits idle beside ready messages, and that the counts match.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from classic import ClassicQueue, QueueConfig
from classic import commands as c
from classic import effects as e

CHANNELS = ["ch1", "ch2", "ch3"]
TAGS = ["t1", "t2"]
PUB = "pub"


class ClassicModel(RuleBasedStateMachine):
    @initialize(max_length=st.sampled_from([None, 3]), max_priority=st.sampled_from([None, 3]),
                sac=st.booleans())
    def setup(self, max_length: int | None, max_priority: int | None, sac: bool) -> None:
        self.cfg = QueueConfig("q", max_length=max_length, max_priority=max_priority,
                               single_active_consumer=sac, dead_letter_exchange="dlx")
        self.q = ClassicQueue(self.cfg, 0)
        self.now = 0
        self.prio: dict[int, int] = {}
        self.ready: set[int] = set()
        self.held: dict[int, tuple[str, Any]] = {}  # id -> (channel, consumer or None)
        self.gone: set[int] = set()
        self.ever_delivered: set[int] = set()
        self.consumers: dict[tuple[str, str], dict[str, Any]] = {}  # key -> record
        self.serial = 0
        self.active: tuple[str, str] | None = None
        self.seq_of: dict[int, int] = {}
        self.persistent: set[int] = set()
        self.written: set[int] = set()
        self.confirmed: set[int] = set()
        self.monitored: set[str] = set()
        self.rejecting: set[int] = set()

    # --- helpers ---------------------------------------------------------------------------

    def head(self) -> int:
        assert self.ready, "delivery from an empty queue"
        return min(self.ready, key=lambda i: (-self.prio[i], i))

    def ready_order(self) -> list[int]:
        return sorted(self.ready, key=lambda i: (-self.prio[i], i))

    def take(self, msg: e.Delivery) -> None:
        assert msg.msg_id == self.head(), (msg.msg_id, self.ready_order())
        assert msg.msg_id not in self.held and msg.msg_id not in self.gone
        assert msg.redelivered == (msg.msg_id in self.ever_delivered)
        self.ready.discard(msg.msg_id)
        self.ever_delivered.add(msg.msg_id)

    def run(self, command: c.Command) -> e.Reply:
        reply, effects = self.q.apply(command, self.now)
        for eff in effects:
            self.absorb(eff)
        assert not self.rejecting, self.rejecting
        return reply

    def absorb(self, eff: e.Effect) -> None:
        match eff:
            case e.Deliver(channel=ch, tag=tag, ack_required=ack, messages=msgs):
                key = (ch, tag)
                assert key in self.consumers, key
                rec = self.consumers[key]
                assert rec["ack"] == ack
                if self.cfg.single_active_consumer:
                    assert key == self.active
                for m in msgs:
                    self.take(m)
                    if ack:
                        self.held[m.msg_id] = (ch, rec["serial"])
                        rec["unacked"] += 1
                    else:
                        self.gone.add(m.msg_id)
            case e.DeadLetter(reason="maxlen", messages=msgs):
                for m in msgs:
                    assert m.msg_id == self.head()
                    self.ready.discard(m.msg_id)
                    self.gone.add(m.msg_id)
            case e.DeadLetter(reason="rejected", messages=msgs):
                for m in msgs:
                    self.rejecting.remove(m.msg_id)
                    self.gone.add(m.msg_id)
            case e.Confirm(channel=ch, seqs=seqs):
                assert ch == PUB
                for s in seqs:
                    assert s not in self.confirmed
                    self.confirmed.add(s)
                    mid = next(i for i, q in self.seq_of.items() if q == s)
                    if mid in self.persistent:
                        assert mid in self.written or mid in self.gone, mid
            case e.Monitor(channel=ch):
                assert ch not in self.monitored
                self.monitored.add(ch)
            case e.Demonitor(channel=ch):
                self.monitored.remove(ch)
            case e.StoreWrite(messages=msgs):
                assert all(m.persistent for m in msgs)
            case e.StoreRemove(msg_ids=ids):
                assert all(i in self.gone for i in ids)
            case _:
                raise AssertionError(f"unexpected effect {eff!r}")

    def consumer_of(self, owner: Any) -> dict[str, Any] | None:
        for rec in self.consumers.values():
            if rec["serial"] == owner:
                return rec
        return None

    def release(self, ids: list[int]) -> None:
        for i in ids:
            _, owner = self.held.pop(i)
            rec = self.consumer_of(owner)
            if rec is not None:
                rec["unacked"] -= 1

    def held_by(self, ch: str) -> list[int]:
        return sorted(i for i, (hc, _) in self.held.items() if hc == ch)

    def drop_consumer(self, key: tuple[str, str]) -> None:
        del self.consumers[key]
        if self.active == key:
            self.active = None
            if self.consumers:
                self.active = max(self.consumers,
                                  key=lambda k: (self.consumers[k]["prio"],
                                                 -self.consumers[k]["serial"]))

    # --- rules -----------------------------------------------------------------------------

    @rule(prio=st.sampled_from([None, 0, 1, 2, 5]), persistent=st.booleans(),
          confirm=st.booleans())
    def publish(self, prio: int | None, persistent: bool, confirm: bool) -> None:
        mid = self.q.next_msg_id
        self.prio[mid] = self.cfg.clamp_priority(prio)
        self.ready.add(mid)
        if persistent:
            self.persistent.add(mid)
        seq = None
        if confirm:
            seq = len(self.seq_of) + 1
            self.seq_of[mid] = seq
        assert self.run(c.Deliver(PUB, seq, "ex", ("rk",), 1, persistent, prio, None,
                                  mid)) == e.Ok()

    @rule(data=st.data())
    def written(self, data: st.DataObject) -> None:
        pending = sorted(self.persistent - self.written)
        if pending:
            ids = data.draw(st.lists(st.sampled_from(pending), max_size=3, unique=True))
            self.written.update(ids)
            self.run(c.Written(tuple(ids)))

    @rule(ch=st.sampled_from(CHANNELS), tag=st.sampled_from(TAGS), ack=st.booleans(),
          prefetch=st.sampled_from([0, 1, 2]), prio=st.sampled_from([0, 1]))
    def consume(self, ch: str, tag: str, ack: bool, prefetch: int, prio: int) -> None:
        if (ch, tag) in self.consumers:
            return  # the channel refuses a reused tag before the queue sees it
        self.consumers[(ch, tag)] = {"ack": ack, "prefetch": prefetch, "prio": prio,
                                     "serial": self.serial, "unacked": 0}
        self.serial += 1
        if self.cfg.single_active_consumer and self.active is None:
            self.active = (ch, tag)
        assert self.run(c.BasicConsume(ch, tag, ack, prefetch, prio)) == e.ConsumeOk(tag)

    @rule(ch=st.sampled_from(CHANNELS), tag=st.sampled_from(TAGS))
    def cancel(self, ch: str, tag: str) -> None:
        if (ch, tag) in self.consumers:
            self.drop_consumer((ch, tag))
        assert self.run(c.BasicCancel(ch, tag)) == e.Ok()

    @rule(ch=st.sampled_from(CHANNELS), ack=st.booleans())
    def get(self, ch: str, ack: bool) -> None:
        reply, effects = self.q.apply(c.BasicGet(ch, ack), self.now)
        if isinstance(reply, e.GetOk):
            self.take(reply.delivery)
            if ack:
                self.held[reply.delivery.msg_id] = (ch, None)
            else:
                self.gone.add(reply.delivery.msg_id)
            assert reply.message_count == len(self.ready)
        else:
            assert reply == e.GetEmpty() and not self.ready
        for eff in effects:
            self.absorb(eff)

    @rule(ch=st.sampled_from(CHANNELS), data=st.data(),
          how=st.sampled_from(["ack", "requeue", "reject"]))
    def settle(self, ch: str, data: st.DataObject, how: str) -> None:
        mine = self.held_by(ch)
        if not mine:
            return
        ids = data.draw(st.lists(st.sampled_from(mine), min_size=1, max_size=3, unique=True))
        self.release(ids)
        if how == "ack":
            self.gone.update(ids)
            self.run(c.Ack(ch, tuple(ids)))
        elif how == "requeue":
            self.ready.update(ids)
            self.run(c.Reject(ch, tuple(ids), True))
        else:
            self.rejecting.update(ids)
            self.run(c.Reject(ch, tuple(ids), False))

    @rule(ch=st.sampled_from(CHANNELS))
    def recover(self, ch: str) -> None:
        ids = self.held_by(ch)
        self.release(ids)
        self.ready.update(ids)
        self.run(c.Recover(ch))

    @rule(ch=st.sampled_from(CHANNELS))
    def channel_down(self, ch: str) -> None:
        for key in [k for k in self.consumers if k[0] == ch]:
            self.drop_consumer(key)
        ids = self.held_by(ch)
        self.release(ids)
        self.ready.update(ids)
        self.monitored.discard(ch)
        self.run(c.NotifyDown(ch))

    @rule(ch=st.sampled_from(CHANNELS))
    def writer_caught_up(self, ch: str) -> None:
        self.run(c.NotifySent(ch, 1000))

    @rule()
    def purge(self) -> None:
        n = len(self.ready)
        self.gone.update(self.ready)
        self.ready.clear()
        assert self.run(c.Purge()) == e.Ok(message_count=n)

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def same_messages_in_the_same_order(self) -> None:
        if not hasattr(self, "q"):
            return
        assert [x.content for x in self.q.ready] == self.ready_order()
        assert self.q.messages_ready == len(self.ready)
        assert self.q.messages_unacknowledged == len(self.held)
        assert self.q.consumer_count == len(self.consumers)
        every = self.ready | set(self.held) | self.gone
        assert every == set(self.prio)  # nothing lost
        assert len(self.ready) + len(self.held) + len(self.gone) == len(self.prio)  # no dups

    @invariant()
    def limits_hold_and_no_consumer_idles(self) -> None:
        if not hasattr(self, "q"):
            return
        if self.cfg.max_length is not None:
            assert len(self.ready) <= self.cfg.max_length
        for key, rec in self.consumers.items():
            if rec["ack"] and rec["prefetch"]:
                assert rec["unacked"] <= rec["prefetch"]
            room = not rec["ack"] or rec["prefetch"] == 0 or rec["unacked"] < rec["prefetch"]
            eligible = not self.cfg.single_active_consumer or key == self.active
            if room and eligible:
                assert not self.ready, (key, self.ready_order())
        if self.cfg.single_active_consumer:
            assert self.q.single_active_consumer_tag == (self.active[1] if self.active else None)

    @invariant()
    def confirms_are_due_only_when_written_or_gone(self) -> None:
        if not hasattr(self, "q"):
            return
        for mid, seq in self.seq_of.items():
            settled = mid not in self.persistent or mid in self.written or mid in self.gone
            assert (seq in self.confirmed) == settled, (mid, seq)


ClassicModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestClassicModel = ClassicModel.TestCase
