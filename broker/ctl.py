"""`warren ctl`: rabbitmqctl / rabbitmq-queues for a warren cluster.

The CLI becomes a short-lived node of its own (`warren_ctl_<pid>@127.0.0.1:PORT`,
authenticated with the same cookie as the cluster), runs the command's
function from `broker.ctl_ops` on the target node and prints the result as a
tab-separated table with a header (`--formatter json` prints JSON). Exit
codes follow rabbitmqctl: 0 ok, 64 usage error, 65 refused (bad data, no such
queue), 69 node unreachable, 70 internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from broker import ctl_wait
from channel.access.passwords import DEFAULT_HASHING_ALGORITHM, hash_password

__all__ = ["EX_DATAERR", "EX_SOFTWARE", "EX_UNAVAILABLE", "EX_USAGE", "add_parser", "run"]

EX_USAGE = 64
EX_DATAERR = 65
EX_UNAVAILABLE = 69
EX_SOFTWARE = 70
#: seconds a command waits for the node's answer unless `--timeout` says otherwise
DEFAULT_TIMEOUT = 30.0


def _q(args: argparse.Namespace) -> tuple[Any, ...]:
    return (args.vhost, args.queue)


def _hashed(password: str) -> tuple[str, str]:
    """(password hash, hashing algorithm) as the user's record keeps them."""
    return hash_password(password), DEFAULT_HASHING_ALGORITHM


# command -> (function name in broker.ctl_ops, arguments from the parsed flags)
COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], tuple[Any, ...]]]] = {
    "cluster_status": ("cluster_status", lambda a: ()),
    "alarms": ("alarms", lambda a: ()),
    "list_queues": ("list_queues", lambda a: (a.vhost, tuple(a.columns))),
    "delete_queue": ("delete_queue", lambda a: (a.vhost, a.queue, a.if_unused, a.if_empty)),
    "purge_queue": ("purge_queue", lambda a: (a.vhost, a.queue)),
    "list_bindings": ("list_bindings", lambda a: (a.vhost, tuple(a.columns))),
    "list_vhosts": ("list_vhosts", lambda a: (tuple(a.columns),)),
    "add_vhost": ("add_vhost", lambda a: (a.name, a.default_queue_type, a.description,
                                          a.tags)),
    "delete_vhost": ("delete_vhost", lambda a: (a.name,)),
    "list_exchanges": ("list_exchanges", lambda a: (a.vhost,)),
    "list_policies": ("list_policies", lambda a: (a.vhost,)),
    "list_connections": ("list_connections", lambda a: ()),
    # the password is hashed here, so it never leaves the CLI in clear
    "add_user": ("add_user", lambda a: (a.username, *_hashed(a.password))),
    "change_password": ("change_password_hash", lambda a: (a.username, *_hashed(a.password))),
    "clear_password": ("change_password_hash", lambda a: (a.username, "",
                                                          DEFAULT_HASHING_ALGORITHM)),
    "delete_user": ("delete_user", lambda a: (a.username,)),
    "set_user_tags": ("set_user_tags", lambda a: (a.username, a.tags)),
    "set_permissions": ("set_permissions", lambda a: (a.vhost, a.username, a.conf, a.write,
                                                      a.read)),
    "clear_permissions": ("clear_permissions", lambda a: (a.vhost, a.username)),
    "list_users": ("list_users", lambda a: ()),
    "list_permissions": ("list_permissions", lambda a: (a.vhost,)),
    "list_channels": ("list_channels", lambda a: ()),
    "set_topic_permissions": ("set_topic_permissions", lambda a: (
        a.vhost, a.username, a.exchange, a.write, a.read)),
    "clear_topic_permissions": ("clear_topic_permissions", lambda a: (
        a.vhost, a.username, a.exchange)),
    "list_topic_permissions": ("list_topic_permissions", lambda a: (a.vhost,)),
    "list_user_topic_permissions": ("list_user_topic_permissions", lambda a: (a.username,)),
    "set_vhost_limits": ("set_vhost_limits", lambda a: (a.vhost, a.definition)),
    "clear_vhost_limits": ("clear_vhost_limits", lambda a: (a.vhost,)),
    "list_vhost_limits": ("list_vhost_limits", lambda a: (a.vhost, a.all_vhosts)),
    "set_user_limits": ("set_user_limits", lambda a: (a.username, a.definition)),
    "clear_user_limits": ("clear_user_limits", lambda a: (a.username, a.limit_type)),
    "list_user_limits": ("list_user_limits", lambda a: (a.user, a.all_users)),
    "quorum_status": ("quorum_status", _q),
    "add_member": ("add_member", lambda a: (*_q(a), a.member_node)),
    "delete_member": ("delete_member", lambda a: (*_q(a), a.member_node)),
    "grow": ("grow", lambda a: (a.member_node,)),
    "shrink": ("shrink", lambda a: (a.member_node,)),
    "rebalance": ("rebalance", lambda a: ()),
    "set_policy": ("set_policy", lambda a: (a.vhost, a.name, a.pattern, a.definition,
                                            a.priority, a.apply_to)),
    "clear_policy": ("clear_policy", lambda a: (a.vhost, a.name)),
    "set_vm_memory_high_watermark": ("set_vm_memory_high_watermark", lambda a: (a.value,)),
    "set_disk_free_limit": ("set_disk_free_limit", lambda a: (a.value,)),
    "stop_member": ("stop_member", lambda a: (*_q(a), a.member_node)),
    "start_member": ("start_member", lambda a: (*_q(a), a.member_node)),
    "crash_channel": ("crash_channel", lambda a: (a.pid,)),
    "crash_queue": ("crash_queue", _q),
    "dlx_workers": ("dlx_workers", lambda a: ()),
    "partition": ("partition", lambda a: (a.groups,)),
    "heal": ("heal", lambda a: ()),
    "pause_node": ("pause_node", lambda a: (a.paused,)),
    "resume_node": ("resume_node", lambda a: (a.paused,)),
    "set_disk_delay": ("set_disk_delay", lambda a: (a.ms,)),
    "wal_status": ("wal_status", lambda a: ()),
}


_NODE_NAME = re.compile(r"[^@\s]+@[^@\s]+:(\d{1,5})")


def node_name_error(name: str) -> str | None:
    """Why `name` cannot name a node (`name@host:port`, the port 1..65535), or None.

    A malformed `--node` is the caller's mistake, reported as a usage error before
    any connection is tried, not as an unreachable node."""
    found = _NODE_NAME.fullmatch(name)
    if found is None or not 0 < int(found.group(1)) < 65536:
        return f"invalid node name '{name}': expected name@host:port"
    return None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"definition is not valid JSON: {exc}")
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("definition must be a JSON object")
    return value


def _node_group(text: str) -> list[str]:
    """`n1,n2`: one side of a partition."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"empty node group {text!r}")
    return names


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_parser(sub: Any) -> None:
    ctl = sub.add_parser("ctl", help="operate a running cluster (rabbitmqctl)")
    ctl.add_argument("--node", "-n", required=True, help="target node name@host:port")
    ctl.add_argument("--vhost", "-p", default="/")
    ctl.add_argument("--formatter", choices=("table", "json"), default="table")
    ctl.add_argument("--timeout", "-t", type=float, default=None,
                     help="seconds (default 30; 300 for wait and await_startup)")
    ctl.add_argument("--cookie", default=None, help="default: WARREN_COOKIE or ~/.warren.cookie")
    cmds = ctl.add_subparsers(dest="ctl_command", required=True)
    _add_queue_parsers(cmds)
    ctl_wait.add_parsers(cmds)
    for name in ("cluster_status", "alarms", "list_exchanges", "list_policies",
                 "list_connections", "list_channels", "rebalance", "dlx_workers",
                 "heal", "wal_status", "list_users", "list_permissions"):
        cmds.add_parser(name)
    for name in ("quorum_status", "crash_queue"):
        cmds.add_parser(name).add_argument("queue")
    for name in ("add_member", "delete_member", "stop_member", "start_member"):
        p = cmds.add_parser(name)
        p.add_argument("queue")
        p.add_argument("member_node")
    for name in ("grow", "shrink"):
        cmds.add_parser(name).add_argument("member_node")
    for name in ("add_user", "change_password"):
        au = cmds.add_parser(name)
        au.add_argument("username")
        au.add_argument("password")
    for name in ("delete_user", "clear_permissions", "clear_password"):
        cmds.add_parser(name).add_argument("username")
    tags = cmds.add_parser("set_user_tags")
    tags.add_argument("username")
    tags.add_argument("tags", nargs="*")
    perms = cmds.add_parser("set_permissions")
    for arg in ("username", "conf", "write", "read"):
        perms.add_argument(arg)
    sp = cmds.add_parser("set_policy")
    sp.add_argument("name")
    sp.add_argument("pattern")
    sp.add_argument("definition", type=_json_object)
    sp.add_argument("--priority", type=int, default=0)
    sp.add_argument("--apply-to", default="all")
    cmds.add_parser("clear_policy").add_argument("name")
    _add_limit_parsers(cmds)
    _add_topic_permission_parsers(cmds)
    cmds.add_parser("set_vm_memory_high_watermark").add_argument("value", type=float)
    cmds.add_parser("set_disk_free_limit").add_argument("value", type=int)
    cmds.add_parser("crash_channel").add_argument("pid")
    cmds.add_parser("partition", help="fault injection: cut the cluster into groups").add_argument(
        "groups", nargs="+", type=_node_group, metavar="GROUP",
        help="comma-separated node names (full or the part before '@')")
    for name in ("pause_node", "resume_node"):
        cmds.add_parser(name, help="fault injection: a stopped node").add_argument(
            "paused", nargs="?", default=None, metavar="NODE",
            help="the paused node (default: the target node)")
    cmds.add_parser("set_disk_delay", help="fault injection: a slow WAL sync").add_argument(
        "ms", type=_non_negative, help="milliseconds before each WAL fdatasync (0 clears)")
    ctl.set_defaults(func=run)


def _add_queue_parsers(cmds: Any) -> None:
    """rabbitmqctl's queue, binding and vhost commands (`broker.ctl_queues`); listings
    take the info keys to show as columns."""
    for name in ("list_queues", "list_bindings", "list_vhosts"):
        _vhost_flag(cmds.add_parser(name)).add_argument("columns", nargs="*",
                                                        metavar="INFO_KEY")
    dq = _vhost_flag(cmds.add_parser("delete_queue"))
    dq.add_argument("queue")
    dq.add_argument("--if-unused", "-u", action="store_true")
    dq.add_argument("--if-empty", "-e", action="store_true")
    _vhost_flag(cmds.add_parser("purge_queue")).add_argument("queue")
    av = cmds.add_parser("add_vhost")
    av.add_argument("name")
    av.add_argument("--default-queue-type", default=None)
    av.add_argument("--description", default=None)
    av.add_argument("--tags", default=None, help="comma-separated")
    cmds.add_parser("delete_vhost").add_argument("name")


def _vhost_flag(p: Any) -> Any:
    """`-p` may also follow the command name, as with rabbitmqctl."""
    p.add_argument("--vhost", "-p", default=argparse.SUPPRESS)
    return p


def _add_topic_permission_parsers(cmds: Any) -> None:
    st = _vhost_flag(cmds.add_parser("set_topic_permissions"))
    for arg in ("username", "exchange", "write", "read"):
        st.add_argument(arg)
    ct = _vhost_flag(cmds.add_parser("clear_topic_permissions"))
    ct.add_argument("username")
    ct.add_argument("exchange", nargs="?", default=None)
    _vhost_flag(cmds.add_parser("list_topic_permissions"))
    cmds.add_parser("list_user_topic_permissions").add_argument("username")


def _add_limit_parsers(cmds: Any) -> None:
    """rabbitmqctl's limit commands."""
    vhost_flag = _vhost_flag

    vhost_flag(cmds.add_parser("set_vhost_limits")).add_argument(
        "definition", help="limit definitions, a JSON document")
    vhost_flag(cmds.add_parser("clear_vhost_limits"))
    vhost_flag(cmds.add_parser("list_vhost_limits")).add_argument(
        "--global", dest="all_vhosts", action="store_true",
        help="the limits of every vhost")
    su = cmds.add_parser("set_user_limits")
    su.add_argument("username")
    su.add_argument("definition", help="limit definitions, a JSON document")
    cu = cmds.add_parser("clear_user_limits")
    cu.add_argument("username")
    cu.add_argument("limit_type", help="max-connections, max-channels or all")
    lu = cmds.add_parser("list_user_limits")
    lu.add_argument("--user", default="guest")
    lu.add_argument("--global", dest="all_users", action="store_true",
                    help="the limits of every user")


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):  # as rabbitmqctl prints them
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def render(result: Any, formatter: str) -> str:
    if formatter == "json":
        return json.dumps(result, sort_keys=True, default=str)
    if isinstance(result, dict):
        return "\n".join(f"{k}\t{_fmt(v)}" for k, v in result.items())
    if isinstance(result, list):
        if not result:
            return ""
        header = list(result[0])
        lines = ["\t".join(header)]
        lines += ["\t".join(_fmt(row.get(k)) for k in header) for row in result]
        return "\n".join(lines)
    return _fmt(result)


def run(args: argparse.Namespace) -> int:
    from actors import Node
    from broker.formation import ping
    from ra import system as ra_system
    from transports.tick import TickConfig
    from transports.zmq import ZmqTransport
    from transports.zmq_node import free_port

    waiting = ctl_wait.COMMANDS.get(args.ctl_command)
    args.timeout = ctl_wait.command_timeout(args.ctl_command, args.timeout, DEFAULT_TIMEOUT)
    bad_name = node_name_error(args.node)
    if bad_name is not None:
        print(f"Error: {bad_name}", file=sys.stderr)
        return EX_USAGE
    name = f"warren_ctl_{os.getpid()}@127.0.0.1:{free_port()}"
    # a long wait for a node to boot is no reason to notice a lost one late
    ticktime = max(2.0, DEFAULT_TIMEOUT if waiting is not None else args.timeout)
    transport = ZmqTransport(tick=TickConfig(net_ticktime=ticktime),
                             cookie=args.cookie)
    node = Node(name, transport=transport).start()
    try:
        with node.attached():
            if waiting is not None:
                return waiting(args, lambda: _unreachable(args.node))
            if ping(args.node, int(min(args.timeout, 5) * 1000)) != "pong":
                return _unreachable(args.node)
            fun_name, get_args = COMMANDS[args.ctl_command]
            result = ra_system.rpc(args.node, _remote, fun_name, get_args(args),
                                   timeout=int(args.timeout * 1000))
    finally:
        node.stop("shutdown")
    match result:
        case ("ok", value):
            text = render(value, args.formatter)
            if text:
                print(text)
            return 0
        case ("ctl_error", code, message):
            print(f"Error:\n{message}", file=sys.stderr)
            return int(code)
        case ("badrpc", reason):
            print(f"Error: {args.node}: {reason}", file=sys.stderr)
            return EX_UNAVAILABLE if reason in ("nodedown", "timeout") else EX_SOFTWARE
    print(f"Error: unexpected reply {result!r}", file=sys.stderr)
    return EX_SOFTWARE


def _unreachable(node: str) -> int:
    print(f"Error: unable to perform an operation on node '{node}'. "
          "Please see diagnostics information and suggestions below.\n\n"
          f"node {node} is unreachable (is it running? "
          "is the cookie the same?)", file=sys.stderr)
    return EX_UNAVAILABLE


def _remote(fun_name: str, fun_args: tuple[Any, ...]) -> Any:
    """Runs on the target node: the operation, its errors made data."""
    import actors
    from broker import ctl_ops
    from broker.running import RUNNING
    from channel.errors import AmqpError

    if actors.node() not in RUNNING:
        return ("ctl_error", EX_UNAVAILABLE, f"{actors.node()} runs no broker")
    from broker import ctl_queues

    fun = getattr(ctl_queues, fun_name, None) or getattr(ctl_ops, fun_name)
    try:
        return ("ok", fun(*fun_args))
    except ctl_ops.CtlError as exc:
        return ("ctl_error", exc.code, str(exc))
    except AmqpError as exc:
        return ("ctl_error", EX_DATAERR, f"{exc.name} - {exc.explanation}")
    except Exception as exc:
        return ("ctl_error", EX_SOFTWARE, f"{type(exc).__name__}: {exc}")
