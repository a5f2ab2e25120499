"""The slice of RabbitMQ's message container (``mc``) the queue machine reads.

The machine only needs a message's size, TTL, priority and the
``delivery_count`` annotation; bodies stay opaque. Any object offering the
`MessageContainer` methods counts as a container; anything else is a "raw"
message (tests, stateless publishes), which machine version 7 treats as having
no TTL, default priority and no annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BasicMessage",
    "MessageContainer",
    "get_annotation",
    "is_mc",
    "message_size",
    "priority",
    "set_annotation",
    "ttl",
]


@runtime_checkable
class MessageContainer(Protocol):
    def mc_size(self) -> tuple[int, int]: ...

    def mc_ttl(self) -> int | None: ...

    def mc_priority(self) -> int | None: ...

    def mc_get_annotation(self, key: str) -> Any: ...

    def mc_set_annotation(self, key: str, value: Any) -> MessageContainer: ...


#: classes already seen to satisfy (or not) the protocol: ``isinstance`` against a
#: runtime-checkable Protocol rescans its members on every call, and this test runs
#: for every message on every replica
_MC_CLASSES: dict[type, bool] = {}


def is_mc(msg: Any) -> bool:
    cls = type(msg)
    known = _MC_CLASSES.get(cls)
    if known is None:
        known = _MC_CLASSES[cls] = isinstance(msg, MessageContainer)
    return known


def message_size(msg: Any) -> tuple[int, int]:
    """``{MetadataSize, PayloadSize}``; raw bodies have no metadata."""
    if is_mc(msg):
        return msg.mc_size()
    if isinstance(msg, bytes | bytearray | memoryview):
        return (0, len(msg))
    if isinstance(msg, str):
        return (0, len(msg.encode()))
    return (0, len(repr(msg).encode()))


def ttl(msg: Any) -> int | None:
    return msg.mc_ttl() if is_mc(msg) else None


def priority(msg: Any) -> int | None:
    return msg.mc_priority() if is_mc(msg) else None


def get_annotation(key: str, msg: Any) -> Any:
    return msg.mc_get_annotation(key) if is_mc(msg) else None


def set_annotation(key: str, value: Any, msg: Any) -> Any:
    return msg.mc_set_annotation(key, value) if is_mc(msg) else msg


@dataclass(frozen=True, slots=True)
class BasicMessage:
    """A minimal immutable container: a body plus the properties the queue reads."""

    body: bytes = b""
    priority: int | None = None
    ttl: int | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    metadata_size: int = 0

    def mc_size(self) -> tuple[int, int]:
        return (self.metadata_size, len(self.body))

    def mc_ttl(self) -> int | None:
        return self.ttl

    def mc_priority(self) -> int | None:
        return self.priority

    def mc_get_annotation(self, key: str) -> Any:
        return self.annotations.get(key)

    def mc_set_annotation(self, key: str, value: Any) -> BasicMessage:
        return replace(self, annotations={**self.annotations, key: value})
