"""The classic queue type (``rabbit_amqqueue_process``): its queue logic as a pure core.

`ClassicQueue` takes the commands of `classic.commands` with the current time
and returns a reply and the effects of `classic.effects`; it does no I/O. The
process shell, channel wiring, message store and CLI are built on top of it.
"""

from classic.config import QueueConfig, resource
from classic.queue import ClassicQueue

__all__ = ["ClassicQueue", "QueueConfig", "resource"]
