"""The workload's message id (header ``x-warren-id``) of a message, for history rows.

Only called when a trace sink is installed: decoding the properties of every message
is a cost a run pays only while it is being recorded. Lets the analysis follow one
message from the client through the channel to the queue and back (``channel_events``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channel.protocol.framing import Content
from fifo.replica_trace import ID_HEADER, id_value


def msg_id_of(content: Content) -> int | None:
    """The integer in the ``x-warren-id`` header, or None (absent, undecodable)."""
    try:
        headers = content.properties().headers
    except Exception:  # properties a client sent malformed carry no id
        return None
    return id_in(headers)


def id_in(headers: Mapping[str, Any] | None) -> int | None:
    """The id in already decoded headers."""
    return id_value((headers or {}).get(ID_HEADER))
