"""Per-channel command assembly (`rabbit_command_assembler`), pure.

A content-bearing method (basic.publish) arrives as a method frame, a content
header frame and zero or more body frames; only the complete command goes to
the channel, and only then does the reader spend a credit. Frames out of
order are connection errors with RabbitMQ's texts.

A header declaring a body larger than the configured `max_message_size` is
not worth reading: the publish is handed to the channel at once with an
`UnreadContent` (which the channel refuses with its 406, as it would the whole
message), and the body frames that follow are counted off and dropped, so a
client cannot make the node hold a body it is going to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.wire import frozen_init
from channel.errors import AmqpError
from channel.protocol.framing import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    Content,
    MethodFrame,
    UnreadContent,
    method_ids,
    parse_content_header,
)
from channel.protocol.method_check import CONTENT_METHODS

__all__ = ["MAX_MSG_SIZE", "Assembler", "Command", "has_content"]

MAX_MSG_SIZE = 536_870_912


def has_content(method: MethodFrame) -> bool:
    return method.name in CONTENT_METHODS


@frozen_init
@dataclass(frozen=True, slots=True)
class Command:
    method: MethodFrame
    content: Content | None


@dataclass
class Assembler:
    max_body_size: int = MAX_MSG_SIZE
    """Bodies declared larger than this are dropped unread (the node's max_message_size)."""
    header_size_check: bool = True
    """Whether a header declaring more than `MAX_MSG_SIZE` is a 501 (RabbitMQ 4.2.9 on;
    `Release.content_header_size_check`)."""
    state: str = "method"
    """"method", "header", "body", or "discard" (the body of a refused publish)."""
    method: MethodFrame | None = None
    properties_bin: bytes = b""
    remaining: int = 0
    body: list[bytes] = field(default_factory=list)
    buffered: int = 0
    """Body bytes held for the command being assembled."""
    last_properties_bin: bytes = b""
    """The previous header's raw properties. A publisher nearly always sends the same
    ones, and a classic queue keeps every message's content in memory: equal
    properties share this one bytes object instead of a copy per message."""

    def _ids(self) -> tuple[int, int]:
        return method_ids(self.method) if self.method is not None else (0, 0)

    def method_frame(self, method: MethodFrame) -> Command | None:
        if self.state == "header":
            class_id = self._ids()[0]
            raise AmqpError(
                "UNEXPECTED_FRAME",
                f"expected content header for class {class_id}, "
                "got non content header frame instead", self._ids())
        if self.state in ("body", "discard"):
            raise AmqpError("UNEXPECTED_FRAME",
                            "expected content body, got non content body frame instead",
                            self._ids())
        if has_content(method):
            self.state, self.method = "header", method
            return None
        return Command(method, None)

    def content_frame(self, frame_type: int, payload: bytes) -> Command | None:
        if self.state == "method":
            raise AmqpError("UNEXPECTED_FRAME",
                            "expected method frame, got non method frame instead")
        assert self.method is not None
        if self.state == "header":
            return self._header(frame_type, payload)
        if frame_type != FRAME_BODY:
            raise AmqpError("UNEXPECTED_FRAME",
                            "expected content body, got non content body frame instead",
                            self._ids())
        if len(payload) > self.remaining:
            raise AmqpError("FRAME_ERROR", "content body frame exceeds remaining content size",
                            self._ids())
        self.remaining -= len(payload)
        if self.state == "discard":
            if self.remaining == 0:
                self._reset()
            return None
        self.body.append(bytes(payload))
        self.buffered += len(payload)
        return self._complete() if self.remaining == 0 else None

    def _header(self, frame_type: int, payload: bytes) -> Command | None:
        class_id = self._ids()[0]
        if frame_type != FRAME_HEADER:
            raise AmqpError(
                "UNEXPECTED_FRAME",
                f"expected content header for class {class_id}, "
                "got non content header frame instead", self._ids())
        try:
            header = parse_content_header(payload)
        except (ValueError, IndexError) as exc:
            raise AmqpError("FRAME_ERROR", f"malformed content header: {exc}") from exc
        if header.class_id != class_id or header.weight != 0:
            raise AmqpError(
                "UNEXPECTED_FRAME",
                f"expected content header for class {class_id}, "
                f"got one for class {header.class_id} instead", self._ids())
        if self.header_size_check and header.body_size > MAX_MSG_SIZE:
            raise AmqpError(
                "FRAME_ERROR",
                f"content body size {header.body_size} exceeds maximum allowed size "
                f"{MAX_MSG_SIZE}", self._ids())
        properties_bin = header.properties_bin
        if properties_bin == self.last_properties_bin:
            properties_bin = self.last_properties_bin
        else:
            self.last_properties_bin = properties_bin
        self.properties_bin, self.remaining = properties_bin, header.body_size
        self.body, self.buffered = [], 0
        if self.remaining > self.max_body_size:
            assert self.method is not None
            refused = Command(self.method, UnreadContent(
                header.properties_bin, b"", class_id, header.body_size))
            self.state, self.properties_bin = "discard", b""
            return refused
        if self.remaining == 0:
            return self._complete()
        self.state = "body"
        return None

    def _complete(self) -> Command:
        assert self.method is not None
        command = Command(self.method, Content(self.properties_bin, b"".join(self.body),
                                               self._ids()[0]))
        self._reset()
        return command

    def _reset(self) -> None:
        self.state, self.method, self.properties_bin = "method", None, b""
        self.body, self.buffered, self.remaining = [], 0, 0


__all__ += ["FRAME_METHOD"]
