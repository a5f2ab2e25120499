"""Which `rabbit_fifo` code a node restarts its quorum-queue members with: its
release's, keeping the queue's config (`broker.queue_code`)."""

from __future__ import annotations

import pytest

from broker.queue_code import machine_for_code
from fifo.ra_glue import QueueMachine, machine_config

CONFIG = machine_config("%2F_q", ("resource", "/", "queue", "q"), delivery_limit=7)


def test_a_member_restarted_on_newer_code_runs_that_code_with_its_config() -> None:
    machine = machine_for_code(QueueMachine(CONFIG, 7), 8)
    assert isinstance(machine, QueueMachine)
    assert machine.version() == 8 and machine.config == CONFIG
    # the new code still runs the entries of the version the queue is at
    assert machine.which_module(7).version() == 7


def test_a_member_restarted_on_older_code_gets_the_older_code() -> None:
    assert machine_for_code(QueueMachine(CONFIG, 8), 7).version() == 7


def test_a_3_10_queue_is_left_on_its_machine_and_other_machines_are_untouched() -> None:
    v2 = QueueMachine(CONFIG, 2)
    assert machine_for_code(v2, 8) is v2
    same = QueueMachine(CONFIG, 8)
    assert machine_for_code(same, 8) is same
    other = object()
    assert machine_for_code(other, 8) is other


def test_code_knows_no_machine_version_newer_than_its_own() -> None:
    """As 4.2's `rabbit_fifo:which_module/1` has no clause for 8: a member whose
    snapshot is newer than its code cannot start."""
    with pytest.raises(ValueError, match="newer than this code"):
        QueueMachine(CONFIG, 7).which_module(8)
