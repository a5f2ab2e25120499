"""The one hook through which runtime code records history.

Runtime packages call `emit(kind, **fields)`; nothing is recorded until a sink
is installed (the broker installs the analysis recorder). Keeping the hook
here means `actors` and everything above it never import the recorder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["emit", "enabled", "set_sink"]

Sink = Callable[[str, dict[str, Any]], None]
_sink: Sink | None = None


def set_sink(sink: Sink | None) -> Sink | None:
    """Install `sink` (or remove it with None); returns the previous one."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def enabled() -> bool:
    """Cheap guard for call sites that would build expensive fields."""
    return _sink is not None


def emit(kind: str, **fields: Any) -> None:
    sink = _sink
    if sink is not None:
        sink(kind, fields)
