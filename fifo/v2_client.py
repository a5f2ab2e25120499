"""What a 3.10 session (``rabbit_fifo_client`` of machine 2) tells the channel
differently from 4.x's.

A ``basic.get`` always carries ``x-delivery-count``: 0 for a message never given
back, which a consumer's delivery leaves out (RabbitMQ 3.10.8 answers so); the
message counts as redelivered once its count is above 0.
"""

from __future__ import annotations

from typing import Any

from fifo import mc
from fifo.msg import get_header

__all__ = ["dequeued"]


def dequeued(qname: Any, qref: Any, msg_id: int, header: Any, msg: Any) -> tuple[Any, ...]:
    """``{QName, QRef, MsgId, Redelivered, Msg}`` for a message taken by ``basic.get``."""
    count = get_header("delivery_count", header)
    count = count if isinstance(count, int) else 0
    if mc.is_mc(msg):
        msg = mc.set_annotation("x-delivery-count", count, msg)
    return (qname, qref, msg_id, count > 0, msg)
