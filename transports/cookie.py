"""The distribution cookie: the shared secret that lets two nodes talk.

Erlang's rules, kept so operators find no surprise: an explicit cookie wins;
else the ``WARREN_COOKIE`` environment variable; else ``~/.warren.cookie``,
which is created with a random value and mode 0600 when missing (as
``~/.erlang.cookie`` is) and refused when others can read it, because anyone
who knows the cookie can run code on every node.
"""

from __future__ import annotations

import os
import secrets
import stat
import string
from collections.abc import Mapping
from pathlib import Path

__all__ = ["COOKIE_ENV", "COOKIE_FILE", "CookieError", "load_cookie"]

COOKIE_ENV = "WARREN_COOKIE"
COOKIE_FILE = ".warren.cookie"


class CookieError(RuntimeError):
    """The cookie file is unusable (unreadable, empty, or readable by others)."""


def _random_cookie() -> str:
    # Erlang writes 20 upper-case letters; same shape, stronger source.
    return "".join(secrets.choice(string.ascii_uppercase) for _ in range(20))


def load_cookie(
    explicit: str | bytes | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> bytes:
    """The cookie to authenticate with, as bytes (see the module docstring)."""
    if explicit is not None:
        value = explicit.encode() if isinstance(explicit, str) else bytes(explicit)
        if not value:
            raise CookieError("an explicit cookie must not be empty")
        return value
    environ = os.environ if env is None else env
    from_env = environ.get(COOKIE_ENV)
    if from_env:
        return from_env.encode()
    path = Path(home if home is not None else Path.home()) / COOKIE_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        os.fchmod(fd, 0o600)  # the umask may have taken the owner's write bit away
        with os.fdopen(fd, "w") as f:
            f.write(_random_cookie())
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CookieError(f"cookie file {path} must be accessible by its owner only")
    value = path.read_bytes().strip()
    if not value:
        raise CookieError(f"cookie file {path} is empty")
    return value
