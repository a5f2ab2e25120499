"""The kinds of value a configuration key takes: each says in words what it expects,
reads a command-line flag's text, and checks (and normalises) a value.

Types are strict, as a node must not start on a value it would misread later: a
boolean is not an integer, a string of digits in a file is not a number, a float is
not an integer. Flags arrive as text, so `parse` turns text into what a file would
hold (`"5672"` into 5672) and leaves anything else as it is, for `check` to refuse
with the text the user typed.

Pure: no I/O. `broker.config_schema` declares which key is of which kind.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from broker.backends import NAMES, canonical
from releases import UnknownRelease, UnmodelledRelease, lookup, modelled_series

__all__ = ["Backend", "Bool", "CreditPair", "FeaturePermits", "Int", "Kind", "Mismatch", "NodeName",
           "NodeNames", "Nullable", "Number", "OneOf", "OrInfinity", "RabbitRelease", "Table",
           "Text", "is_int"]


class Mismatch(ValueError):
    """A value that is not of its key's kind; the caller names the key."""


class Kind(Protocol):
    @property
    def expected(self) -> str:
        """What the key takes, in words: "an integer from 0 to 65535"."""
        ...

    def parse(self, text: str) -> Any:
        """A flag's text as a file would give the value (unchanged when unreadable)."""
        ...

    def check(self, value: Any) -> Any:
        """The value, normalised; `Mismatch` when it is not of this kind."""
        ...


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_INT_TEXT = re.compile(r"[+-]?\d+")


def _int_text(text: str) -> Any:
    return int(text) if _INT_TEXT.fullmatch(text.strip()) else text


class _FromText:
    """A kind whose command-line text is already its value; `check` alone decides."""

    def parse(self, text: str) -> Any:
        return text


@dataclass(frozen=True)
class Int:
    """An integer in ``[lo, hi]`` (no upper bound when `hi` is None); with `zero`,
    0 is taken too and means what `zero` says ("no limit")."""

    lo: int
    hi: int | None = None
    zero: str | None = None
    unit: str | None = None

    @property
    def expected(self) -> str:
        span = f"from {self.lo} to {self.hi}" if self.hi is not None else \
            f"of at least {self.lo}"
        text = f"an integer {span}"
        if self.unit is not None:
            text += f" ({self.unit})"
        return text if self.zero is None else f"{text}, or 0 for {self.zero}"

    def parse(self, text: str) -> Any:
        return _int_text(text)

    def check(self, value: Any) -> int:
        if is_int(value) and ((self.zero is not None and value == 0)
                              or (value >= self.lo
                                  and (self.hi is None or value <= self.hi))):
            return int(value)
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class Number:
    """A finite number (integer or float) above `above`."""

    above: float = 0
    unit: str | None = None

    @property
    def expected(self) -> str:
        bound = int(self.above) if float(self.above).is_integer() else self.above
        text = f"a number above {bound}"
        return text if self.unit is None else f"{text} ({self.unit})"

    def parse(self, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            return text

    def check(self, value: Any) -> float | int:
        if (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value) and value > self.above):
            return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class Bool:
    expected: str = "true or false"

    def parse(self, text: str) -> Any:
        return {"true": True, "false": False}.get(text.strip().lower(), text)

    def check(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class Text(_FromText):
    expected: str = "a non-empty string"

    def check(self, value: Any) -> str:
        if isinstance(value, str) and value:
            return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class OneOf(_FromText):
    choices: tuple[str, ...]

    @property
    def expected(self) -> str:
        return f"one of {', '.join(self.choices)}"

    def check(self, value: Any) -> str:
        if isinstance(value, str) and value in self.choices:
            return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class Backend(_FromText):
    """`rabbit`, `memory`, or a `module:factory` to import; `quorum`, the former name
    of `rabbit`, reads as `rabbit` so that old configs keep the backend they meant."""

    expected: str = "rabbit, memory or module:factory (quorum: rabbit's former name)"

    def check(self, value: Any) -> str:
        if isinstance(value, str) and (canonical(value) in NAMES or re.fullmatch(
                r"[\w.]+:\w+", value)):
            return canonical(value)
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class RabbitRelease(_FromText):
    """A RabbitMQ release series ("4.2") whose quorum-queue machine is one of `built`.

    A series warren knows but cannot run (its `rabbit_fifo` machine version is not
    built) is refused like a mistyped one, naming the series it can model: a node
    must not start claiming a release it would not behave as. A file must quote it
    (``"3.10"``): as a number it would read as 3.1.
    """

    built: tuple[int, ...]

    @property
    def expected(self) -> str:
        return f"a RabbitMQ release this warren models ({', '.join(modelled_series(self.built))})"

    def check(self, value: Any) -> str:
        if not isinstance(value, str):
            raise Mismatch(f"{self.expected}, as a string")
        try:
            return lookup(value, self.built).series
        except UnknownRelease:
            raise Mismatch(self.expected) from None
        except UnmodelledRelease as exc:
            raise Mismatch(str(exc)) from None


def _port(text: str) -> int | None:
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class NodeName(_FromText):
    """``name@host:port``: the port is the node's distribution port."""

    expected: str = "a node name name@host:port (port 1 to 65535)"

    def check(self, value: Any) -> str:
        if isinstance(value, str):
            short, at, address = value.partition("@")
            host, colon, port = address.rpartition(":")
            number = _port(port)
            if short and at and host and colon and number is not None \
                    and 1 <= number <= 65535:
                return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class NodeNames(_FromText):
    """Node names as a list, or as one comma-separated string (a flag)."""

    expected: str = ("node names name@host:port (port 1 to 65535), "
                     "a list or comma-separated")

    def check(self, value: Any) -> list[str]:
        names = [s for s in value.split(",") if s] if isinstance(value, str) else value
        if not isinstance(names, list):
            raise Mismatch(self.expected)
        try:
            return [NodeName().check(n) for n in names]
        except Mismatch:
            raise Mismatch(self.expected) from None


@dataclass(frozen=True)
class Nullable:
    """`kind`, or null (None) meaning what `none` says."""

    kind: Kind
    none: str

    @property
    def expected(self) -> str:
        return f"{self.kind.expected}, or null for {self.none}"

    def parse(self, text: str) -> Any:
        return self.kind.parse(text)

    def check(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            return self.kind.check(value)
        except Mismatch:
            raise Mismatch(self.expected) from None


@dataclass(frozen=True)
class OrInfinity:
    """`kind`, or ``'infinity'`` (upstream's word for no limit), kept as None."""

    kind: Kind

    @property
    def expected(self) -> str:
        return f"{self.kind.expected}, or 'infinity'"

    def parse(self, text: str) -> Any:
        return text if text == "infinity" else self.kind.parse(text)

    def check(self, value: Any) -> Any:
        if value in ("infinity", None):
            return None
        try:
            return self.kind.check(value)
        except Mismatch:
            raise Mismatch(self.expected) from None


@dataclass(frozen=True)
class CreditPair:
    """`credit_flow_default_credit`: ``[initial, more_after]``, kept as a tuple."""

    expected: str = ("a pair [initial, more_after] of integers of at least 0, "
                     "more_after at most initial")

    def parse(self, text: str) -> Any:
        parts = text.split(",")
        return [_int_text(p) for p in parts] if len(parts) == 2 else text

    def check(self, value: Any) -> tuple[int, int]:
        if (isinstance(value, list | tuple) and len(value) == 2
                and all(is_int(v) and v >= 0 for v in value) and value[1] <= value[0]):
            return (int(value[0]), int(value[1]))
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class Table(_FromText):
    """A table of anything (AMQP server properties)."""

    expected: str = "a table"

    def check(self, value: Any) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        raise Mismatch(self.expected)


@dataclass(frozen=True)
class FeaturePermits(_FromText):
    """Per deprecated feature, whether it is permitted whatever the release's default
    (rabbitmq.conf's `deprecated_features.permit.<feature> = true|false`)."""

    features: tuple[str, ...]

    @property
    def expected(self) -> str:
        return f"a table of true or false keyed by {', '.join(self.features)}"

    def check(self, value: Any) -> dict[str, bool]:
        if isinstance(value, dict) and all(
                k in self.features and isinstance(v, bool) for k, v in value.items()):
            return dict(value)
        raise Mismatch(self.expected)
