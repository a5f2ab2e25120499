"""The channel's pending-ack records and RabbitMQ's `collect_acks` rule.

Deliveries needing an ack are kept in delivery-tag order. An ack/nack/reject
selects either one tag, every tag up to a given one (`multiple`, which must
name an existing tag), or everything (`multiple` with tag 0); an unknown tag is
a 406 channel error. Pure, so the selection rules are table-tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.wire import frozen_init
from channel.errors import AmqpError

__all__ = ["Pending", "Unacked"]


@frozen_init
@dataclass(frozen=True, slots=True)
class Pending:
    tag: int
    consumer_tag: str | int
    queue: str
    msg_id: object
    delivered_at: int | None = None
    """Monotonic milliseconds of the delivery (the consumer timeout's clock)."""


@dataclass
class Unacked:
    records: dict[int, Pending] = field(default_factory=dict)

    def add(self, record: Pending) -> None:
        self.records[record.tag] = record

    def collect(self, tag: int, multiple: bool) -> list[Pending]:
        """Remove and return the selected records, or raise 406 unknown delivery tag."""
        if multiple and tag == 0:
            taken = list(self.records.values())
            self.records.clear()
            return taken
        if tag not in self.records:
            raise AmqpError("PRECONDITION_FAILED", f"unknown delivery tag {tag}")
        if not multiple:
            return [self.records.pop(tag)]
        taken = [r for t, r in self.records.items() if t <= tag]
        for r in taken:
            del self.records[r.tag]
        return taken

    def take_all(self) -> list[Pending]:
        taken = list(self.records.values())
        self.records.clear()
        return taken

    def restore(self, records: list[Pending]) -> None:
        """Put records back (tx.rollback), keeping delivery-tag order."""
        merged = {**{r.tag: r for r in records}, **self.records}
        self.records = dict(sorted(merged.items()))

    def oldest(self) -> Pending | None:
        return next(iter(self.records.values()), None)

    def __len__(self) -> int:
        return len(self.records)
