"""Wire format of the ZeroMQ distribution protocol, and its handshake.

Every ZeroMQ message between nodes is multipart; its first part is a header:

* ``b"H"`` + one JSON part: a handshake step (never pickle: nothing from an
  unauthenticated peer may reach a deserializer that can run code);
* ``b"D"`` + 8-byte session id, then one part holding a pickled list of
  signals (only ever unpickled for an authenticated, live session);
* ``b"T"`` + session id: a net tick;
* ``b"C"`` + session id: the sender ended the session.

The handshake is a challenge/response over a shared cookie, both ways, so
each side proves it knows the cookie without sending it:

1. initiator → acceptor ``hello``: names, initiator creation, nonce, session id;
2. acceptor → initiator ``challenge``: acceptor creation, nonce, and
   ``HMAC(cookie, "acceptor" | both nonces | names | creations | sid)``;
3. initiator checks it, then sends ``auth`` with the same MAC labelled
   ``"initiator"``; the acceptor checks it before accepting any frame.

``nok`` refuses a hello (wrong name, simultaneous connect, bad MAC). The
labels keep one side's MAC from being replayed as the other's, and the fresh
nonces keep an old exchange from being replayed at all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLOSE",
    "DATA",
    "HANDSHAKE",
    "MAX_HANDSHAKE_BYTES",
    "PROTOCOL_VERSION",
    "TICK",
    "HandshakeError",
    "Transcript",
    "decode",
    "encode",
    "new_nonce",
    "new_sid",
    "sid_header",
    "split_header",
]

PROTOCOL_VERSION = 1
MAX_HANDSHAKE_BYTES = 4096

HANDSHAKE = b"H"
DATA = b"D"
TICK = b"T"
CLOSE = b"C"

_SID = struct.Struct(">Q")


class HandshakeError(ValueError):
    """A handshake message is malformed or fails authentication."""


def new_nonce() -> str:
    return os.urandom(16).hex()


def new_sid() -> int:
    """A random 63-bit session id: unique per connection without coordination."""
    return int.from_bytes(os.urandom(8), "big") >> 1 or 1


def sid_header(kind: bytes, sid: int) -> bytes:
    return kind + _SID.pack(sid)


def split_header(header: bytes) -> tuple[bytes, int]:
    """``(kind, sid)`` of a D/T/C header; raises `HandshakeError` if malformed."""
    if len(header) != 9:
        raise HandshakeError("bad frame header")
    return header[:1], _SID.unpack_from(header, 1)[0]


_FIELDS: dict[str, dict[str, type]] = {
    "hello": {"v": int, "from": str, "to": str, "creation": int, "nonce": str, "sid": int},
    "challenge": {"from": str, "creation": int, "nonce": str, "sid": int, "mac": str},
    "auth": {"sid": int, "mac": str},
    "nok": {"sid": int, "reason": str},
}


def encode(op: str, **fields: Any) -> bytes:
    return json.dumps({"op": op, **fields}, separators=(",", ":")).encode()


def decode(raw: bytes) -> dict[str, Any]:
    """Parse and type-check one handshake message (plain JSON, bounded size)."""
    if len(raw) > MAX_HANDSHAKE_BYTES:
        raise HandshakeError("handshake message too large")
    try:
        msg = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HandshakeError(f"handshake message is not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise HandshakeError("handshake message is not an object")
    spec = _FIELDS.get(msg.get("op"))  # type: ignore[arg-type]
    if spec is None:
        raise HandshakeError(f"unknown handshake op {msg.get('op')!r}")
    for key, typ in spec.items():
        value = msg.get(key)
        if type(value) is not typ:
            raise HandshakeError(f"handshake field {key!r} missing or not {typ.__name__}")
    return msg


@dataclass(frozen=True, slots=True)
class Transcript:
    """What both MACs of one handshake cover."""

    initiator: str
    acceptor: str
    initiator_creation: int
    acceptor_creation: int
    initiator_nonce: str
    acceptor_nonce: str
    sid: int

    def _mac(self, cookie: bytes, label: bytes) -> str:
        parts = [
            b"warren-dist-v1",
            label,
            self.initiator_nonce.encode(),
            self.acceptor_nonce.encode(),
            self.initiator.encode(),
            self.acceptor.encode(),
            str(self.initiator_creation).encode(),
            str(self.acceptor_creation).encode(),
            str(self.sid).encode(),
        ]
        return hmac.new(cookie, b"\x00".join(parts), hashlib.sha256).hexdigest()

    def acceptor_mac(self, cookie: bytes) -> str:
        return self._mac(cookie, b"acceptor")

    def initiator_mac(self, cookie: bytes) -> str:
        return self._mac(cookie, b"initiator")

    @staticmethod
    def check(expected: str, given: str) -> bool:
        return hmac.compare_digest(expected.encode(), given.encode())
