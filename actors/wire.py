"""Cheap pickling for the records that cross nodes on every message.

A frozen dataclass with ``slots=True`` pickles through the ``__getstate__``
and ``__setstate__`` that `dataclasses` generates, which call
``dataclasses.fields`` on every object, both ways: about 3 us per object,
twice the cost of the record's own data. Raft RPCs and queue messages are
pickled for every follower and every WAL write, so `wire_record` gives a
record class a ``__reduce__`` that pickles it as its constructor call
(class, field values), which also makes the unpickling side a plain
``__init__``.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, TypeVar

__all__ = ["wire_record"]

T = TypeVar("T", bound=type)


def wire_record(cls: T) -> T:
    """Class decorator for a dataclass whose fields are all ``__init__`` arguments."""
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__}: every field must be an __init__ argument")
    names = [f.name for f in fields]
    get = operator.attrgetter(*names) if len(names) > 1 else None

    if get is not None:
        def __reduce__(self: Any) -> tuple[Any, tuple[Any, ...]]:
            return (cls, get(self))
    else:
        name = names[0] if names else None

        def __reduce__(self: Any) -> tuple[Any, tuple[Any, ...]]:
            return (cls, (getattr(self, name),) if name is not None else ())

    cls.__reduce__ = __reduce__  # type: ignore[method-assign, assignment]
    return cls
