"""Named points of the log stack where a node process can be made to die.

A durability test starts a node process with ``WARREN_RA_CRASH_AT=<point>`` in
its environment; the process SIGKILLs itself the first time it reaches that
point, exactly as ``kill -9`` would at that instant, and the test restarts it to
check that nothing confirmed was lost. Call sites test `ARMED` first, so an
unarmed process pays one global lookup per rollover, flush or snapshot.

Points: ``wal_rollover`` (the full WAL file is closed and the writer map saved,
the segment writer not yet told), ``segments_written`` (a flush's segments are
renamed into place, the server not yet told), ``segments_reported`` (the server
was sent the ``segments`` event, the WAL file not yet deleted),
``snapshot_before_rename`` (the snapshot is written and synced under its
temporary name), ``snapshot_after_rename`` (the snapshot is in place, the log
has not taken it yet) and ``snapshot_segments_deleted`` (the log took the
snapshot and deleted the segment files it covers, before it told the WAL and
the segment writer the new snapshot index).
"""

from __future__ import annotations

import os
import signal

ENV = "WARREN_RA_CRASH_AT"
POINTS = ("wal_rollover", "segments_written", "segments_reported",
          "snapshot_before_rename", "snapshot_after_rename", "snapshot_segments_deleted")

#: the point this process dies at, if any (read once, when the module is imported)
ARMED: str | None = os.environ.get(ENV) or None


def reached(point: str) -> None:
    """SIGKILL this process if it was started to die at `point`."""
    if point == ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
