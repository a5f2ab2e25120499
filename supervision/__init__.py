"""OTP's supervisor behaviour for warren processes (see `supervision.supervisor`).

`supervision.supervisor` holds the behaviour and its API; the other modules
each do one part of it (specs, child stores, intensity, stopping, reports).
"""

from supervision.childspec import Child, Restarting
from supervision.supervisor import (
    SupervisorModule,
    SupervisorServer,
    check_childspecs,
    count_children,
    delete_child,
    get_childspec,
    restart_child,
    start_child,
    start_link,
    terminate_child,
    which_children,
)

__all__ = [
    "Child",
    "Restarting",
    "SupervisorModule",
    "SupervisorServer",
    "check_childspecs",
    "count_children",
    "delete_child",
    "get_childspec",
    "restart_child",
    "start_child",
    "start_link",
    "terminate_child",
    "which_children",
]
