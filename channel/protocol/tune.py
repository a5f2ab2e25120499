"""connection.tune / tune-ok: the server's offer and the check of the client's answer.

Kept apart from the reader because the rules are small but exact
(`rabbit_reader:validate_negotiated_integer_value`): frame_max has the floor of
the node's release (4096 up to 4.0, 8192 from 4.1), channel_max a floor of 1, a
client value above the server's (or 0 = no limit when the server has one) is
refused, and heartbeat is taken as the client sends it. A refusal is a handshake
error: RabbitMQ logs the text, sends nothing, and closes the socket after its
anti-DoS delay.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TuneError", "Tuned", "negotiate"]


class TuneError(Exception):
    """Parameters the server refuses; the message is RabbitMQ's log text."""


@dataclass(frozen=True, slots=True)
class Tuned:
    frame_max: int
    channel_max: int
    heartbeat: int


def _check(name: str, client: int, server: int, minimum: int, zero_text: str) -> int:
    if client != 0 and client < minimum:
        raise TuneError(
            f"negotiated {name} = {client} is lower than the minimum allowed value ({minimum})"
        )
    if server != 0 and (client == 0 or client > server):
        shown = f"{client}{zero_text}" if client == 0 else str(client)
        raise TuneError(
            f"negotiated {name} = {shown} is higher than the maximum allowed value ({server})"
        )
    return client


def negotiate(frame_max: int, channel_max: int, heartbeat: int,
              server_frame_max: int, server_channel_max: int, *, frame_min: int) -> Tuned:
    """Validate a tune-ok against the server's configuration and its release's
    frame_max floor (`Release.frame_min_size`)."""
    fm = _check("frame_max", frame_max, server_frame_max, frame_min, "")
    cm = _check("channel_max", channel_max, server_channel_max, 1, " (no limit)")
    return Tuned(fm, cm, heartbeat)
