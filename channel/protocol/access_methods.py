"""`access.request` and `access.request-ok` (class 30), which pamqp 4 does not define.

AMQP 0-9-1 kept the access class of 0-8 for compatibility: a client may ask
for a "ticket" to a realm before using it. RabbitMQ ignores realms and tickets
and answers every `access.request` on an open channel with `access.request-ok`
and ticket 1 (`rabbit_channel:handle_method/3`), which old clients still send.
These two classes follow pamqp's method classes (`__slots__` in field order,
an `_<field>` attribute naming each field's AMQP type, `index` as class-id << 16 |
method-id), so the generic decoder, the argument check and the encoder take
them as they take pamqp's own.
"""

from __future__ import annotations

import typing

from pamqp import base

__all__ = ["EXTRA_METHODS", "AccessRequest", "AccessRequestOk"]


class AccessRequest(base.Frame):
    """Ask for an access ticket to `realm`; RabbitMQ reads none of the fields."""

    # field order is wire order, which the codec walks
    __slots__: typing.ClassVar[list[str]] = [  # noqa: RUF023
        "realm", "exclusive", "passive", "active", "write", "read"]
    frame_id: typing.ClassVar[int] = 10
    index: typing.ClassVar[int] = 0x001E000A
    name: typing.ClassVar[str] = "Access.Request"
    synchronous: typing.ClassVar[bool] = True
    valid_responses: typing.ClassVar[list[str]] = ["Access.RequestOk"]

    _realm = "shortstr"
    _exclusive = "bit"
    _passive = "bit"
    _active = "bit"
    _write = "bit"
    _read = "bit"

    def __init__(self, realm: str = "/data", exclusive: bool = False, passive: bool = True,
                 active: bool = True, write: bool = True, read: bool = True) -> None:
        self.realm = realm
        self.exclusive = exclusive
        self.passive = passive
        self.active = active
        self.write = write
        self.read = read


class AccessRequestOk(base.Frame):
    """The granted ticket (RabbitMQ always grants ticket 1)."""

    __slots__: typing.ClassVar[list[str]] = ["ticket"]
    frame_id: typing.ClassVar[int] = 11
    index: typing.ClassVar[int] = 0x001E000B
    name: typing.ClassVar[str] = "Access.RequestOk"
    synchronous: typing.ClassVar[bool] = False

    _ticket = "short"

    def __init__(self, ticket: int = 1) -> None:
        self.ticket = ticket


EXTRA_METHODS: dict[int, type[base.Frame]] = {
    AccessRequest.index: AccessRequest, AccessRequestOk.index: AccessRequestOk}
"""Methods pamqp's `INDEX_MAPPING` lacks, by index."""
