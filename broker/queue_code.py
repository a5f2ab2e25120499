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

from collections.abc import Sequence
from typing import Any

import actors
from broker.running import broker_of
from fifo.ra_glue import QueueMachine
from ra import system as ra_system

__all__ = ["code_version", "initial_machine_version", "machine_for_code"]


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


def code_version() -> int:
    """``rabbit_fifo:version()`` on the calling node: its release's machine version."""
    return broker_of().release.machine_version


def initial_machine_version(own: int, nodes: Sequence[str], timeout: int = 5000) -> int:
    """The machine version a new queue starts at (``rabbit_quorum_queue:start_cluster``):
    the oldest that the code of its member nodes runs, nodes that do not answer left
    out. A queue declared halfway through a rolling upgrade so gets a member on every
    node and moves to the newer version together with the queues declared before."""
    versions = [own]
    for node in nodes:
        if node != actors.node():
            version = ra_system.rpc(node, code_version, timeout=timeout)
            if isinstance(version, int) and not isinstance(version, bool):
                versions.append(version)
    return min(versions)
