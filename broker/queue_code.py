"""The ``rabbit_fifo`` code a node runs its quorum-queue members with.

In RabbitMQ a member's machine is ``{module, rabbit_fifo, Config}``: the module
is whatever the node has loaded, so a node restarted on a newer release brings
every member it recovers up on that release's code, which supports machine
versions up to the release's own. Ra then moves the queue's *effective* version
forward only when every member reports it can (docs/ra.md, "Machine
versioning"), with one ``{machine_version, Old, New}`` entry each replica applies.

warren keeps the machine object in the member's persisted config, so at boot the
node swaps it for one of its release's version, keeping the queue's config. A
node restarted on an *older* release gets older code too: a member whose code is
behind the queue's effective version stops applying (or, with a newer snapshot,
does not start), as Ra does.
"""

from __future__ import annotations

from typing import Any

from fifo.ra_glue import QueueMachine

__all__ = ["machine_for_code"]


def machine_for_code(machine: Any, code_version: int) -> Any:
    """`machine` as the code of `code_version` runs it.

    Machines that are not quorum queues are returned as they are, and so is a
    3.10 (machine 2) queue asked to run on 4.x code: warren has no conversion
    from machine 2, and RabbitMQ does not upgrade 3.10 to 4.x in place either.
    """
    if not isinstance(machine, QueueMachine):
        return machine
    current = machine.version()
    if current == code_version or current <= 2 < code_version:
        return machine
    return QueueMachine(machine.config, code_version)
