"""warren's Erlang-style process runtime on pykka + gevent.

`Node` is the runtime of one node; the functions re-exported here act for the
calling process, like Erlang's BIFs. See docs/actors.md.
"""

from actors import gen_batch_server
from actors.api import (
    TIMEOUT,
    cancel_timer,
    demonitor,
    disconnect_node,
    exit,
    get_node,
    is_process_alive,
    link,
    make_ref,
    monitor,
    monitor_node,
    monitor_nodes,
    node,
    nodes,
    process_flag,
    read_timer,
    receive,
    register,
    registered,
    self,
    send,
    send_after,
    sleep,
    spawn,
    spawn_link,
    spawn_monitor,
    start_timer,
    unlink,
    unregister,
    whereis,
)
from actors.node import Node, NoProc
from actors.pid import CallExit, NoSuchName, Pid, ProcessExit, Ref, is_clean_reason
from actors.process import NotAProcess, Process, current

__all__ = [
    "TIMEOUT",
    "CallExit",
    "NoProc",
    "NoSuchName",
    "Node",
    "NotAProcess",
    "Pid",
    "Process",
    "ProcessExit",
    "Ref",
    "cancel_timer",
    "current",
    "demonitor",
    "disconnect_node",
    "exit",
    "gen_batch_server",
    "get_node",
    "is_clean_reason",
    "is_process_alive",
    "link",
    "make_ref",
    "monitor",
    "monitor_node",
    "monitor_nodes",
    "node",
    "nodes",
    "process_flag",
    "read_timer",
    "receive",
    "register",
    "registered",
    "self",
    "send",
    "send_after",
    "sleep",
    "spawn",
    "spawn_link",
    "spawn_monitor",
    "start_timer",
    "unlink",
    "unregister",
    "whereis",
]

# Importing the submodule `actors.node` binds it over the function of the same
# name; Erlang's node() is the function, so bind it back.
from actors.api import node  # noqa: F811
