"""What every operator command shares as it runs on the node: the refusal it raises,
rabbitmqctl's status for a missing thing, and how long a command waits for a
node-local answer.

Kept apart from the commands so that their modules (`broker.ctl_ops`,
`broker.ctl_queues`) can use each other's commands without importing each other
for these.
"""

from __future__ import annotations

__all__ = ["EX_UNAVAILABLE", "INFO_TIMEOUT", "CtlError"]

INFO_TIMEOUT = 2000
#: rabbitmqctl's status for some refusals (a parameter or vhost that does not exist)
EX_UNAVAILABLE = 69


class CtlError(Exception):
    """A refused command: `code` is the CLI's exit status (65 = data error)."""

    def __init__(self, message: str, code: int = 65) -> None:
        super().__init__(message)
        self.code = code
