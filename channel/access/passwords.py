"""Salted password hashes as RabbitMQ's internal users keep them.

Why: a user's password must never be stored, logged or sent between processes
in clear. RabbitMQ stores ``salt ‖ H(salt ‖ password)`` with a 4-byte random
salt and records which hash function made it (`rabbit_password`, and the
`rabbit_password_hashing_sha256` module by default); its definitions carry the
same bytes base64-encoded. warren keeps exactly that base64 text, so a hash
taken from a RabbitMQ definitions export is a valid warren password hash and
the reverse.

Only the standard library is imported: `warren ctl` hashes a password with this
module before the command leaves the CLI, without loading the broker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable

__all__ = [
    "DEFAULT_HASHING_ALGORITHM",
    "HASHING_ALGORITHMS",
    "SALT_BYTES",
    "hash_password",
    "password_matches",
    "salted_hash",
]

DEFAULT_HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
"""RabbitMQ's default `password_hashing_module`, recorded on every user warren hashes."""

HASHING_ALGORITHMS: dict[str, Callable[[bytes], bytes]] = {
    "rabbit_password_hashing_sha256": lambda data: hashlib.sha256(data).digest(),
    "rabbit_password_hashing_sha512": lambda data: hashlib.sha512(data).digest(),
    # what RabbitMQ assumes for users stored before it recorded the algorithm
    "rabbit_password_hashing_md5": lambda data: hashlib.md5(data).digest(),
}
"""The hash functions a stored record may name; only the default makes new hashes."""

SALT_BYTES = 4


def _utf8(password: str | bytes) -> bytes:
    return password.encode("utf-8") if isinstance(password, str) else bytes(password)


def salted_hash(algorithm: str, salt: bytes, password: str | bytes) -> bytes:
    """``H(salt ‖ password)`` with the named algorithm (`rabbit_password:salted_hash/3`)."""
    return HASHING_ALGORITHMS[algorithm](salt + _utf8(password))


def hash_password(password: str | bytes, *, salt: bytes | None = None,
                  algorithm: str = DEFAULT_HASHING_ALGORITHM) -> str:
    """base64 of ``salt ‖ H(salt ‖ password)``, the salt random unless given.

    A given salt is for records that must be the same on every member of the
    metadata store (the default user's, made by the machine's `init`)."""
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    if len(salt) != SALT_BYTES:
        raise ValueError(f"a salt is {SALT_BYTES} bytes, got {len(salt)}")
    return base64.b64encode(salt + salted_hash(algorithm, salt, password)).decode("ascii")


def password_matches(password_hash: str, algorithm: str, password: str | bytes) -> bool:
    """Whether `password` is the one `password_hash` was made from, compared in
    constant time. An empty or malformed hash (a cleared password) matches nothing,
    as in RabbitMQ; so does an algorithm warren does not know."""
    fun = HASHING_ALGORITHMS.get(algorithm)
    if fun is None or not password_hash:
        return False
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) <= SALT_BYTES:
        return False
    salt, digest = raw[:SALT_BYTES], raw[SALT_BYTES:]
    return hmac.compare_digest(digest, fun(salt + _utf8(password)))
