"""Cheap pickling for the records that cross nodes on every message.

A frozen dataclass with ``slots=True`` pickles through the ``__getstate__``
and ``__setstate__`` that `dataclasses` generates, which call
``dataclasses.fields`` on every object, both ways: about 3 us per object,
twice the cost of the record's own data. Raft RPCs and queue messages are
pickled for every follower and every WAL write, so `wire_record` gives a
record class a ``__reduce__`` that pickles it as its constructor call
(class, field values), which also makes the unpickling side a plain
``__init__``.

That ``__init__`` is the other half of the cost. A frozen dataclass's generated
one stores every field through ``object.__setattr__`` (its own ``__setattr__``
refuses), about 0.3 us a field: building a ten-field queue message took 1.7-2.9
us, and unpickling a log entry (message, command, pid) about 3 us. `frozen_init`
gives such a class an ``__init__`` that stores through the slots' own
descriptors instead, 0.9 us for the same message; the class stays frozen.
"""

from __future__ import annotations

import dataclasses
import operator
import types
from typing import Any, TypeVar, cast

__all__ = ["frozen_init", "wire_record"]

T = TypeVar("T", bound=type)


def _not_plain(cls: type) -> str | None:
    """Why `frozen_init` cannot serve `cls`, or None."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        return "needs a frozen dataclass with slots"
    if hasattr(cls, "__post_init__"):
        return "does not run __post_init__"
    fields = dataclasses.fields(cls)
    if any(not f.init or f.kw_only for f in fields):
        return "needs every field a positional __init__ argument"
    if any(type(_slot(cls, f.name)) is not types.MemberDescriptorType for f in fields):
        return "needs every field stored in a slot"
    return None


def _slot(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def frozen_init(cls: T) -> T:
    """Class decorator: a frozen, slotted dataclass's ``__init__`` stores through its
    slot descriptors (same signature and defaults; assignment still raises).

    Only for the plain case, refused otherwise: every field a positional
    ``__init__`` argument, no ``__post_init__``."""
    why = _not_plain(cls)
    if why is not None:
        raise TypeError(f"{cls.__name__}: frozen_init {why}")
    _install_init(cls)
    return cls


def _install_init(cls: type) -> None:
    """Replace `cls`'s ``__init__`` (which `_not_plain` found plain) with one that
    stores through the slot descriptors."""
    fields = dataclasses.fields(cls)
    scope: dict[str, Any] = {"__wr_factory": _FACTORY}
    params_src: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        scope[f"__wr_set{i}"] = _slot(cls, f.name).__set__
        value = f.name
        if f.default is not dataclasses.MISSING:
            scope[f"__wr_default{i}"] = f.default
            params_src.append(f"{f.name}=__wr_default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"__wr_make{i}"] = f.default_factory
            params_src.append(f"{f.name}=__wr_factory")
            value = f"__wr_make{i}() if {f.name} is __wr_factory else {f.name}"
        else:
            params_src.append(f.name)
        body.append(f"    __wr_set{i}(__wr_self, {value})")
    source = (f"def __init__(__wr_self, {', '.join(params_src)}):\n"
              + ("\n".join(body) if body else "    pass"))
    exec(source, scope)  # the source holds only the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cast(Any, cls).__init__.__annotations__)
    cls.__init__ = init  # type: ignore[misc]  # replacing the class's __init__ is the point


class _Factory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Factory()


def wire_record(cls: T) -> T:
    """Class decorator for a dataclass whose fields are all ``__init__`` arguments.

    A frozen, slotted one also gets `frozen_init` when it can have it."""
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__}: every field must be an __init__ argument")
    if _not_plain(cls) is None:
        _install_init(cls)
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
