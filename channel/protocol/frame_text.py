"""The texts RabbitMQ puts in frame errors, a frame's payload printed as Erlang prints it.

A broken frame is answered with the frame's type and (up to 16 octets of) its
payload: ``FRAME_ERROR - type 8, all octets = <<"ab">>: unknown_frame``, or
``UNEXPECTED_FRAME - type 3, first 16 octets = <<...>>``. RabbitMQ 4.x prints
the payload with Erlang's ``~tp``, and an undecodable method's arguments with
``~w`` (``cannot decode <<0,0,3>>``). Clients and tests compare these texts, so
they are reproduced here byte for byte, including the line break ``~tp`` puts
in a long run of integers. Pure: bytes in, text out.
"""

from __future__ import annotations

__all__ = [
    "cannot_decode",
    "erlang_binary",
    "frame_error_text",
    "payload_snippet",
    "unexpected_frame_text",
    "write_binary",
]

_LINE = 80
"""The line length Erlang's pretty printer fills (`io_lib_pretty`)."""

#: bytes and code points Erlang prints inside a string (io_lib:printable_latin1_list)
_PRINTABLE = frozenset(range(32, 127)) | frozenset(range(160, 256)) | frozenset(
    (8, 9, 10, 11, 12, 13, 27))
_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v",
            8: "\\b", 12: "\\f", 27: "\\e"}


def payload_snippet(payload: bytes) -> tuple[str, bytes]:
    """`rabbit_reader:payload_snippet/1`: the whole payload up to 16 octets, else the first 16."""
    if len(payload) <= 16:
        return "all", payload
    return "first 16", payload[:16]


def _quoted(text: str) -> str:
    return '"' + "".join(_ESCAPES.get(ord(c), c) for c in text) + '"'


def erlang_binary(data: bytes, column: int) -> str:
    """`~tp` of a binary that starts at `column` of its line.

    Valid UTF-8 of printable characters prints as a string (``/utf8`` when not
    plain ASCII); other bytes that are all printable Latin-1 print as a Latin-1
    string; anything else as integers, broken over lines of 80 columns when it
    does not fit after `column`.
    """
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        if text and all(ord(c) in _PRINTABLE for c in text):
            return "<<" + _quoted(text) + ("" if text.isascii() else "/utf8") + ">>"
    elif all(b in _PRINTABLE for b in data):
        return "<<" + _quoted(data.decode("latin-1")) + ">>"
    flat = write_binary(data)
    if column + len(flat) <= _LINE + 1:
        return flat
    indent = column + 2
    parts, at = ["<<"], indent
    for i, byte in enumerate(data):
        piece = str(byte) + ("," if i < len(data) - 1 else ">>")
        if at + len(piece) > _LINE - 1 and at > indent:
            parts.append("\n" + " " * indent)
            at = indent
        parts.append(piece)
        at += len(piece)
    return "".join(parts)


def write_binary(data: bytes) -> str:
    """`~w` of a binary: always integers, one line."""
    return "<<" + ",".join(str(b) for b in data) + ">>"


def _framed(ftype: int, payload: bytes) -> str:
    which, snippet = payload_snippet(payload)
    prefix = f"type {ftype}, {which} octets = "
    return prefix + erlang_binary(snippet, len(prefix))


def frame_error_text(ftype: int, payload: bytes, error: str) -> str:
    """The explanation of a 501 FRAME_ERROR about a whole frame (`error` already an Erlang term)."""
    return f"{_framed(ftype, payload)}: {error}"


def unexpected_frame_text(ftype: int, payload: bytes) -> str:
    """The explanation of a 505 UNEXPECTED_FRAME about a frame the connection cannot take now."""
    return _framed(ftype, payload)


def cannot_decode(fields: bytes) -> str:
    """The explanation of a 501 FRAME_ERROR for a method whose arguments do not decode."""
    return f"cannot decode {write_binary(fields)}"
