"""Why a node could not start, as one line and a sysexits code.

`warren node start` checks what it can before starting anything (the
configuration, then the data directory), then binds the distribution port, then
starts the node's supervision tree, whose AMQP listener binds last, as RabbitMQ's
networking boot step does. Each failure the operator can fix becomes a
`StartupError`: a one-line text and the exit status sysexits.h gives its kind.

- 78 (EX_CONFIG): a configuration value that can never work (an unknown key, a
  wrong type, a value out of range);
- 73 (EX_CANTCREAT): the data directory cannot be created or written (a file is in
  its place, no permission);
- 69 (EX_UNAVAILABLE): a port the node must listen on is unavailable (another
  process holds it, the address is not this machine's);
- 70 (EX_SOFTWARE): anything else that stops the start (an internal error).
"""

from __future__ import annotations

import errno
import os
from typing import Any

__all__ = ["EX_CANTCREAT", "EX_CONFIG", "EX_SOFTWARE", "EX_UNAVAILABLE", "StartupError",
           "describe_posix", "distribution_failure", "listener_failure", "posix_reason",
           "prepare_data_dir"]

EX_UNAVAILABLE = 69
EX_SOFTWARE = 70
EX_CANTCREAT = 73
EX_CONFIG = 78


class StartupError(Exception):
    """A start that cannot succeed as configured: `str()` is the one line to print."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def posix_reason(exc: BaseException) -> str:
    """``eaddrinuse`` for EADDRINUSE, as Erlang names a posix error; the message
    when the error has no errno name (a resolver error). Takes an `OSError` or
    anything with its ``errno`` and ``strerror`` (a ZeroMQ error)."""
    number = getattr(exc, "errno", None)
    name = errno.errorcode.get(number) if isinstance(number, int) else None
    if name is not None:
        return name.lower()
    return str(getattr(exc, "strerror", None) or exc)


def describe_posix(reason: str) -> str:
    """``Address already in use (eaddrinuse)`` for ``eaddrinuse``; other text as it is."""
    code = getattr(errno, reason.upper(), None) if reason.startswith("e") else None
    return f"{os.strerror(code)} ({reason})" if isinstance(code, int) else reason


def prepare_data_dir(path: str) -> None:
    """Create the data directory (mode 0700, with its parents) or check the one there
    is a directory the node can write; `StartupError` 73 otherwise."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StartupError(f"cannot use data directory {path}: "
                           "it exists and is not a directory", EX_CANTCREAT)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot use data directory {path}: "
                           f"{describe_posix(posix_reason(exc))}", EX_CANTCREAT) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StartupError(f"cannot use data directory {path}: "
                           f"{describe_posix('eacces')}", EX_CANTCREAT)


def distribution_failure(node: str, exc: BaseException) -> StartupError:
    """The distribution port (the port of the node's name) could not be bound."""
    address = node.partition("@")[2]
    reason = posix_reason(exc)
    hint = "; is a node with this name running?" if reason == "eaddrinuse" else ""
    return StartupError(f"cannot listen for node links on {address} (node {node}): "
                        f"{describe_posix(reason)}{hint}", EX_UNAVAILABLE)


def listener_failure(reason: Any) -> StartupError | None:
    """A listener's ``could_not_start_listener`` anywhere in a failed start's exit
    reason (`rabbit_networking`'s error; the management listeners add their protocol,
    ``HTTP``, as a fifth element), or None."""
    found = _find_listener_error(reason)
    if found is None:
        return None
    host, port, posix = found[1:4]
    protocol = found[4] if len(found) == 5 else "AMQP"
    return StartupError(f"cannot listen for {protocol} on {host}:{port}: "
                        f"{describe_posix(posix)}", EX_UNAVAILABLE)


def _find_listener_error(reason: Any) -> tuple[Any, ...] | None:
    if isinstance(reason, tuple):
        if len(reason) in (4, 5) and reason[0] == "could_not_start_listener":
            return reason
        for part in reason:
            found = _find_listener_error(part)
            if found is not None:
                return found
    return None
