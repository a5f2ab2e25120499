"""The node runtime: one per OS process (several per process in tests).

A `Node` holds every table Erlang's runtime holds for a node — processes by
serial, registered names, timers, and the bookkeeping of links and monitors
that cross to other nodes — and carries out every signal. Its methods never
yield to the hub, so each signal takes effect atomically with respect to other
greenlets; that, plus one ordered transport stream per node pair, is what gives
Erlang's per-sender ordering for messages, exits and DOWNs alike.

Time comes only from `self.clock` (see `actors.clock`).
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import cloudpickle
from gevent import Timeout
from gevent.event import AsyncResult
from gevent.hub import get_hub
from greenlet import getcurrent

from actors import dist, trace
from actors.clock import Clock, GeventClock, TimerHandle
from actors.dist import Transport
from actors.pid import NoSuchName, Pid, ProcessExit, Ref
from actors.process import Process, current, log_exit

__all__ = ["NoProc", "Node", "new_creation"]

log = logging.getLogger("warren.node")

_DEAD_SERIAL = 0


class NoProc(Exception):
    """`link` to a local process that does not exist (Erlang raises noproc)."""


def new_creation(data_dir: str | None = None, name: str = "node") -> int:
    """A non-zero 32-bit incarnation number, different from the previous one.

    With a data directory the last value is remembered there, so a restart of
    the same node is guaranteed to get a new one; without it, time plus
    randomness make a clash vanishingly unlikely.
    """
    previous = None
    path = None
    if data_dir is not None:
        os.makedirs(data_dir, mode=0o700, exist_ok=True)  # a data dir is its owner's only
        path = os.path.join(data_dir, f"{name.replace('/', '_')}.creation")
        try:
            with open(path) as f:
                previous = int(f.read().strip() or 0)
        except (OSError, ValueError):
            previous = None
    while True:
        value = ((time.time_ns() // 1_000_000) ^ random.getrandbits(32)) & 0xFFFFFFFF
        if value != 0 and value != previous:
            break
    if path is not None:
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(str(value))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return value


@dataclass(slots=True)
class _Timer:
    handle: TimerHandle
    deadline: float
    dest: Any
    msg: Any
    wrap: bool


class Node:
    """A named node (``name@host:port``) with its process table and services."""

    def __init__(
        self,
        name: str,
        *,
        transport: Transport | None = None,
        clock: Clock | None = None,
        creation: int | None = None,
        data_dir: str | None = None,
        strict_copy: bool | None = None,
    ) -> None:
        self.name = name
        # Round-trip local messages through pickle (Erlang copies every message), so that a
        # message that could never cross a node boundary fails in unit tests.
        if strict_copy is None:
            strict_copy = os.environ.get("WARREN_STRICT_COPY") == "1"
        self.strict_copy = strict_copy
        self.creation = creation if creation is not None else new_creation(data_dir, name)
        self.clock: Clock = clock or GeventClock()
        self.transport = transport
        self._hub = get_hub()
        self._serial = 0
        self._refn = 0
        self.procs: dict[int, Process] = {}
        self.names: dict[str, Process] = {}
        self._timers: dict[Ref, _Timer] = {}
        # distribution bookkeeping, per peer node
        self._peers_up: dict[str, int] = {}
        self._links_by_peer: dict[str, set[tuple[Pid, Pid]]] = defaultdict(set)
        self._out_mons: dict[str, dict[Ref, Pid]] = defaultdict(dict)
        self._in_mons: dict[str, dict[Ref, Pid]] = defaultdict(dict)
        self._pending_spawns: dict[str, dict[Ref, Pid]] = defaultdict(dict)
        # remote spawns waiting for their reply: ref -> (link, monitor ref)
        self._spawn_opts: dict[Ref, tuple[bool, Ref | None]] = {}
        self._node_mons: dict[str, dict[Pid, int]] = defaultdict(dict)
        self._nodes_subs: dict[Pid, list[bool]] = {}
        self._ping_waiters: dict[str, list[AsyncResult]] = defaultdict(list)
        self._started = False
        self.stopped = False

    def __repr__(self) -> str:
        return f"Node({self.name!r}, creation={self.creation})"

    # ------------------------------------------------------------------ setup

    def start(self) -> Node:
        if not self._started:
            self._started = True
            if self.transport is not None:
                self.transport.attach(self)
        return self

    def stop(self, reason: Any = "killed") -> None:
        """End every process of this node and close its links to other nodes."""
        if self.stopped:
            return
        self.stopped = True
        for proc in list(self.procs.values()):
            self._kill(proc, reason)
        for tref in list(self._timers):
            self.cancel_timer(tref)
        if self.transport is not None:
            self.transport.close()

    def make_ref(self) -> Ref:
        self._refn += 1
        return Ref(self.name, self.creation, self._refn)

    def _new_pid(self) -> Pid:
        self._serial += 1
        return Pid(self.name, self._serial, self.creation)

    def _local(self, pid: Pid) -> Process | None:
        if pid.creation != self.creation:
            return None
        return self.procs.get(pid.serial)

    # ------------------------------------------------------------ processes

    def spawn(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        *,
        link: Process | None = None,
        monitor: Process | None = None,
        trap_exit: bool = False,
    ) -> Pid:
        """Start a local process running `fn(*args)`.

        With `link` the new process is linked to that process and with
        `monitor` watched by it, both before its first instruction runs (the
        atomicity of spawn_link / spawn_monitor); the monitor's ref is in
        `self.last_spawn_ref`.
        """
        if self.stopped:
            raise RuntimeError(f"node {self.name} is stopped")
        pid = self._new_pid()
        proc = Process(self, pid, fn, args)
        proc.trap_exit = trap_exit
        self.procs[pid.serial] = proc
        if link is not None:
            proc.links.add(link.pid)
            link.links.add(pid)
        if monitor is not None:
            ref = self.make_ref()
            proc.watchers[ref] = (monitor.pid, pid)
            monitor.monitors[ref] = pid
            self.last_spawn_ref = ref
        proc._start_actor_loop()
        if trace.enabled():
            trace.emit("process_start", node=self.name, pid=pid)
        return pid

    @contextmanager
    def attached(self) -> Iterator[Process]:
        """Make the calling greenlet a process for the duration of the block.

        Tests and the CLI use this to send, receive and call like any process.
        An exit signal that would kill it marks it dead; its next runtime call
        raises `ProcessExit`.
        """
        g = getcurrent()
        if getattr(g, "_warren_proc", None) is not None:
            raise RuntimeError("this greenlet is already a process")
        pid = self._new_pid()
        proc = Process(self, pid, None)
        proc.greenlet = None
        self.procs[pid.serial] = proc
        g._warren_proc = proc
        try:
            yield proc
        finally:
            g._warren_proc = None
            if not proc.dead:
                self._terminate(proc, "normal")

    def is_process_alive(self, pid: Pid) -> bool:
        if pid.node != self.name:
            raise ValueError(f"is_process_alive({pid!r}): not a local pid")
        proc = self._local(pid)
        return proc is not None and not proc.dead

    def _terminate(self, proc: Process, reason: Any) -> None:
        """Erlang's exit sequence: names, timers, then links, then monitors."""
        if proc.dead:
            return
        proc.dead = True
        proc.exit_reason = reason
        proc.actor_inbox.clear()
        pid = proc.pid
        self.procs.pop(pid.serial, None)
        if proc.name is not None:
            self.names.pop(proc.name, None)
            proc.name = None
        for tref in list(proc.timers):
            self.cancel_timer(tref)
        links, proc.links = proc.links, set()
        for other in links:
            if other.node == self.name:
                target = self._local(other)
                if target is not None:
                    self._exit_signal(target, pid, reason, True)
            else:
                self._links_by_peer[other.node].discard((pid, other))
                self._dist(other.node, (dist.EXIT, pid, other.serial, other.creation, reason, True))
        watchers, proc.watchers = proc.watchers, {}
        for ref, (watcher, obj) in watchers.items():
            self._down(watcher, ref, obj, reason)
        monitors, proc.monitors = proc.monitors, {}
        for ref, target in monitors.items():
            self._drop_monitor(proc, ref, target)
        for slot in list(proc.slots.values()):
            if not slot.ready():
                slot.set(None)
        self._nodes_subs.pop(pid, None)
        for subs in self._node_mons.values():
            subs.pop(pid, None)
        proc.actor_stopped.set()
        log_exit(pid, reason)
        if trace.enabled():
            trace.emit("process_exit", node=self.name, pid=pid, reason=repr(reason))

    def _kill(self, proc: Process, reason: Any) -> None:
        """End `proc` now (bookkeeping first), then unwind its greenlet."""
        if proc.dead:
            return
        self._terminate(proc, reason)
        g = proc.greenlet
        if g is not None and not proc.attached:
            g.kill(ProcessExit(reason), block=False)

    # ------------------------------------------------------------------ send

    def send(self, dest: Any, msg: Any) -> None:
        """Erlang's `!`: asynchronous; silent for pids, raises for a missing local name."""
        if self.strict_copy:
            msg = pickle.loads(pickle.dumps(msg, protocol=5))
        t = type(dest)
        if t is Pid:
            if dest.node == self.name:
                if dest.creation == self.creation:
                    proc = self.procs.get(dest.serial)
                    if proc is not None:
                        proc.actor_inbox.put(msg)
                return
            if self._stale(dest):
                return
            self._dist(dest.node, (dist.SEND, dest.serial, dest.creation, msg))
        elif t is str:
            proc = self.names.get(dest)
            if proc is None:
                raise NoSuchName(dest)
            proc.actor_inbox.put(msg)
        elif t is tuple and len(dest) == 2:
            name, node = dest
            if node == self.name:
                proc = self.names.get(name)
                if proc is not None:
                    proc.actor_inbox.put(msg)
            else:
                self._dist(node, (dist.SEND_NAME, name, msg))
        else:
            raise TypeError(f"not a destination: {dest!r}")

    def _stale(self, pid: Pid) -> bool:
        """A pid of an earlier incarnation of a node we are connected to."""
        creation = self._peers_up.get(pid.node)
        return creation is not None and creation != pid.creation

    def is_stale(self, pid: Pid) -> bool:
        """Whether `pid` belongs to an earlier incarnation of a node this one is connected
        to (the node restarted since): no process of it can be alive."""
        return self._stale(pid)

    def _dist(self, peer: str, signal: tuple[Any, ...]) -> None:
        transport = self.transport
        if transport is None or self.stopped:
            # No way to reach any node: behave as a failed connection setup.
            self._hub.loop.run_callback(self.dist_nodedown, peer, "no_network")
            return
        transport.send(peer, signal)

    # ----------------------------------------------------------------- links

    def link(self, proc: Process, target: Pid) -> None:
        if target == proc.pid or target in proc.links:
            return
        if target.node == self.name:
            other = self._local(target)
            if other is None or other.dead:
                if proc.trap_exit:
                    proc.actor_inbox.put(("EXIT", target, "noproc"))
                    return
                raise NoProc(f"link({target!r}): no such process")
            proc.links.add(target)
            other.links.add(proc.pid)
            return
        proc.links.add(target)
        if self._stale(target):
            self._exit_signal(proc, target, "noproc", True)
            return
        self._links_by_peer[target.node].add((proc.pid, target))
        self._dist(target.node, (dist.LINK, proc.pid, target.serial, target.creation))

    def unlink(self, proc: Process, target: Pid) -> None:
        if target not in proc.links:
            return
        proc.links.discard(target)
        if target.node == self.name:
            other = self._local(target)
            if other is not None:
                other.links.discard(proc.pid)
        else:
            self._links_by_peer[target.node].discard((proc.pid, target))
            self._dist(target.node, (dist.UNLINK, proc.pid, target.serial, target.creation))

    def exit_signal(self, sender: Pid, target: Pid, reason: Any) -> None:
        """`exit(Pid, Reason)`: an explicit (not link-borne) exit signal."""
        if target.node == self.name:
            proc = self._local(target)
            if proc is not None:
                self._exit_signal(proc, sender, reason, False)
        elif not self._stale(target):
            signal = (dist.EXIT, sender, target.serial, target.creation, reason, False)
            self._dist(target.node, signal)

    def _exit_signal(self, proc: Process, sender: Pid, reason: Any, is_link: bool) -> None:
        """The receive side of an exit signal: the decision table of ERTS."""
        if proc.dead:
            return
        if is_link:
            if sender not in proc.links:
                return  # row 1: the link was removed meanwhile
            proc.links.discard(sender)
        if not is_link and reason == "kill":
            self._kill(proc, "killed")  # row 2: untrappable
        elif proc.trap_exit:
            proc.actor_inbox.put(("EXIT", sender, reason))  # row 3
        elif reason == "normal":
            if sender == proc.pid:
                self._kill(proc, "normal")  # row 5
            # row 4: dropped
        else:
            self._kill(proc, reason)  # row 6

    # -------------------------------------------------------------- monitors

    def monitor(self, proc: Process, target: Any, *, slot: bool = False) -> Ref:
        """`monitor(process, Target)`: a new, independent monitor every call.

        With `slot` the DOWN goes to an out-of-band slot under the monitor's
        ref instead of the mailbox (how `call` waits for reply-or-DOWN).
        """
        ref = self.make_ref()
        if slot:
            proc.slots[ref] = AsyncResult()
        t = type(target)
        if t is Pid:
            obj: Any = target
            node = target.node
            key: Any = (target.serial, target.creation)
        elif t is str:
            obj, node, key = (target, self.name), self.name, target
        elif t is tuple and len(target) == 2:
            obj, node, key = target, target[1], target[0]
        else:
            raise TypeError(f"cannot monitor {target!r}")
        if node == self.name:
            watched = self._local(target) if t is Pid else self.names.get(key)
            if watched is None or watched.dead:
                proc.monitors[ref] = obj
                self._deliver_down(proc, ref, obj, "noproc")
                return ref
            watched.watchers[ref] = (proc.pid, obj)
            proc.monitors[ref] = obj
            return ref
        proc.monitors[ref] = obj
        if t is Pid and self._stale(target):
            self._deliver_down(proc, ref, obj, "noproc")
            return ref
        self._out_mons[node][ref] = proc.pid
        self._dist(node, (dist.MONITOR, proc.pid, key, ref))
        return ref

    def demonitor(self, proc: Process, ref: Ref, flush: bool = False, info: bool = False) -> bool:
        target = proc.monitors.pop(ref, None)
        found = target is not None
        if found:
            self._drop_monitor(proc, ref, target)
        if flush:
            proc.actor_inbox.remove_first(
                lambda m: type(m) is tuple and len(m) == 5 and m[0] == "DOWN" and m[1] == ref
            )
        return found if info else True

    def _drop_monitor(self, proc: Process, ref: Ref, obj: Any) -> None:
        """Remove the watched side of a monitor that `proc` no longer holds."""
        node = obj.node if type(obj) is Pid else obj[1]
        if node == self.name:
            watched = self._local(obj) if type(obj) is Pid else self.names.get(obj[0])
            if watched is not None:
                watched.watchers.pop(ref, None)
            else:
                # by-name monitors resolve once; find the holder by ref
                for p in self.procs.values():
                    if p.watchers.pop(ref, None) is not None:
                        break
        else:
            if self._out_mons[node].pop(ref, None) is not None:
                serial = obj.serial if type(obj) is Pid else obj[0]
                self._dist(node, (dist.DEMONITOR, proc.pid, serial, ref))

    def _down(self, watcher: Pid, ref: Ref, obj: Any, reason: Any) -> None:
        if trace.enabled():
            trace.emit("down_sent", node=self.name, actor_path=repr(watcher),
                       monitor_of=repr(obj), reason=repr(reason), ref=repr(ref))
        if watcher.node == self.name:
            proc = self._local(watcher)
            if proc is not None:
                self._deliver_down(proc, ref, obj, reason)
        else:
            self._in_mons[watcher.node].pop(ref, None)
            signal = (dist.DOWN, watcher.serial, watcher.creation, ref, obj, reason)
            self._dist(watcher.node, signal)

    def _deliver_down(self, proc: Process, ref: Ref, obj: Any, reason: Any) -> None:
        if proc.monitors.pop(ref, None) is None and ref not in proc.slots:
            return  # demonitored meanwhile
        if trace.enabled():
            trace.emit("down_received", node=self.name, actor_path=repr(proc.pid),
                       monitor_of=repr(obj), reason=repr(reason), ref=repr(ref))
        slot = proc.slots.get(ref)
        if slot is not None:
            if not slot.ready():
                slot.set(("DOWN", reason))
            return
        proc.actor_inbox.put(("DOWN", ref, "process", obj, reason))

    # ----------------------------------------------------------------- names

    def register(self, name: str, pid: Pid) -> None:
        if not isinstance(name, str) or name in ("undefined",):
            raise ValueError(f"badarg: bad name {name!r}")
        proc = self._local(pid) if pid.node == self.name else None
        if proc is None or proc.dead:
            raise ValueError(f"badarg: {pid!r} is not a live local process")
        if name in self.names:
            raise ValueError(f"badarg: {name!r} is already registered")
        if proc.name is not None:
            raise ValueError(f"badarg: {pid!r} already has the name {proc.name!r}")
        self.names[name] = proc
        proc.name = name

    def unregister(self, name: str) -> None:
        proc = self.names.pop(name, None)
        if proc is None:
            raise ValueError(f"badarg: {name!r} is not registered")
        proc.name = None

    def whereis(self, name: str) -> Pid | None:
        proc = self.names.get(name)
        return None if proc is None else proc.pid

    def registered(self) -> list[str]:
        return list(self.names)

    # ---------------------------------------------------------------- timers

    def send_after(self, ms: int, dest: Any, msg: Any, *, wrap: bool = False) -> Ref:
        """`erlang:send_after` (or `start_timer` with `wrap`); dest is local."""
        if type(dest) is Pid and dest.node != self.name:
            raise ValueError(f"badarg: timer destination {dest!r} is not local")
        if type(dest) is tuple:
            raise ValueError("badarg: timer destination must be a local pid or name")
        tref = self.make_ref()
        seconds = max(ms, 0) / 1000
        handle = self.clock.call_later(seconds, self._fire_timer, tref)
        self._timers[tref] = _Timer(handle, self.clock.monotonic() + seconds, dest, msg, wrap)
        if type(dest) is Pid:
            proc = self._local(dest)
            if proc is None:
                self.cancel_timer(tref)  # a timer to a dead process never fires
            else:
                proc.timers.add(tref)
        return tref

    def _fire_timer(self, tref: Ref) -> None:
        timer = self._timers.pop(tref, None)
        if timer is None:
            return
        msg = ("timeout", tref, timer.msg) if timer.wrap else timer.msg
        dest = timer.dest
        if type(dest) is Pid:
            proc = self._local(dest)
            if proc is not None:
                proc.timers.discard(tref)
                proc.actor_inbox.put(msg)
        else:
            proc = self.names.get(dest)  # names resolve at expiry
            if proc is not None:
                proc.actor_inbox.put(msg)

    def cancel_timer(self, tref: Ref) -> int | bool:
        timer = self._timers.pop(tref, None)
        if timer is None:
            return False
        timer.handle.cancel()
        if type(timer.dest) is Pid:
            proc = self._local(timer.dest)
            if proc is not None:
                proc.timers.discard(tref)
        return max(0, round((timer.deadline - self.clock.monotonic()) * 1000))

    def read_timer(self, tref: Ref) -> int | bool:
        timer = self._timers.get(tref)
        if timer is None:
            return False
        return max(0, round((timer.deadline - self.clock.monotonic()) * 1000))

    # ---------------------------------------------------------- remote spawn

    def spawn_remote(
        self, caller: Process, peer: str, fn: Callable[..., Any], args: tuple[Any, ...],
        *, link: bool = False, monitor: bool = False,
    ) -> tuple[Pid, Ref | None]:
        """Spawn on `peer`; blocks the caller until the peer answers.

        Code travels with cloudpickle. If the peer cannot be reached the
        result is a dead pid, a `noconnection` exit (link) and a
        `noconnection` DOWN (monitor), as Erlang's spawn does.
        """
        ref = self.make_ref()
        mref = self.make_ref() if monitor else None
        payload = cloudpickle.dumps((fn, args))
        caller.slots[ref] = AsyncResult()
        self._pending_spawns[peer][ref] = caller.pid
        self._spawn_opts[ref] = (link, mref)
        self._dist(peer, (dist.SPAWN_REQUEST, caller.pid, ref, payload, link, mref))
        try:
            result = caller.wait_slot(ref, None)
        finally:
            self._spawn_opts.pop(ref, None)
        caller.check_alive()
        if isinstance(result, Pid):
            return result, mref  # link/monitor were set when the reply arrived
        dead = Pid(peer, _DEAD_SERIAL, 0)
        why = "noconnection" if result == "noconnection" else result
        if link:
            caller.links.add(dead)
            self._exit_signal(caller, dead, why, True)
        if mref is not None:
            caller.monitors[mref] = dead
            self._deliver_down(caller, mref, dead, why)
        return dead, mref

    # --------------------------------------------------------- node monitors

    def monitor_node(self, proc: Process, peer: str, flag: bool) -> None:
        subs = self._node_mons[peer]
        if not flag:
            subs.pop(proc.pid, None)
            return
        subs[proc.pid] = subs.get(proc.pid, 0) + 1
        if peer not in self._peers_up and peer != self.name:
            self._connect(peer)

    def monitor_nodes(self, proc: Process, flag: bool, info: bool = False) -> None:
        if flag:
            self._nodes_subs.setdefault(proc.pid, []).append(info)
        else:
            self._nodes_subs.pop(proc.pid, None)

    def nodes(self) -> list[str]:
        return sorted(self._peers_up)

    def is_connected(self, peer: str) -> bool:
        """``lists:member(Peer, nodes())`` without building and sorting the list."""
        return peer in self._peers_up

    def disconnect_node(self, peer: str) -> bool:
        if self.transport is None:
            return False
        return self.transport.disconnect(peer)

    def _connect(self, peer: str) -> None:
        transport = self.transport
        if transport is None:
            self._hub.loop.run_callback(self.dist_nodedown, peer, "no_network")
            return
        connect = getattr(transport, "connect", None)
        if connect is not None:
            connect(peer)

    def ping(self, peer: str, timeout_ms: int = 7000) -> str:
        """`net_adm:ping`: ``"pong"`` once a session with `peer` is up, else ``"pang"``."""
        if peer == self.name or peer in self._peers_up:
            return "pong"
        waiter = AsyncResult()
        self._ping_waiters[peer].append(waiter)
        self._connect(peer)
        try:
            return waiter.get(timeout=timeout_ms / 1000)
        except Timeout:  # a BaseException: `except Exception` would let it escape
            return "pang"
        finally:
            waiters = self._ping_waiters.get(peer)
            if waiters and waiter in waiters:
                waiters.remove(waiter)

    # ------------------------------------------------------- dist callbacks

    def dist_nodeup(self, peer: str, creation: int) -> None:
        self._peers_up[peer] = creation
        for pid, infos in list(self._nodes_subs.items()):
            proc = self._local(pid)
            if proc is None:
                continue
            for with_info in infos:
                proc.actor_inbox.put(("nodeup", peer, {}) if with_info else ("nodeup", peer))
        for waiter in self._ping_waiters.pop(peer, []):
            waiter.set("pong")
        if trace.enabled():
            trace.emit("nodeup", node=self.name, peer=peer)

    def dist_nodedown(self, peer: str, reason: str) -> None:
        """The session with `peer` is gone: fire every link and monitor across it."""
        was_up = self._peers_up.pop(peer, None) is not None
        for local, remote in self._links_by_peer.pop(peer, set()):
            proc = self._local(local)
            if proc is not None:
                self._exit_signal(proc, remote, "noconnection", True)
        for ref, watcher in self._out_mons.pop(peer, {}).items():
            proc = self._local(watcher)
            if proc is not None:
                obj = proc.monitors.get(ref)
                if obj is not None or ref in proc.slots:
                    self._deliver_down(proc, ref, obj, "noconnection")
        for ref, target in self._in_mons.pop(peer, {}).items():
            proc = self._local(target)
            if proc is not None:
                proc.watchers.pop(ref, None)
        for ref, caller in self._pending_spawns.pop(peer, {}).items():
            proc = self._local(caller)
            if proc is not None:
                slot = proc.slots.get(ref)
                if slot is not None and not slot.ready():
                    slot.set("noconnection")
        for pid, count in self._node_mons.pop(peer, {}).items():
            proc = self._local(pid)
            if proc is not None:
                for _ in range(count):
                    proc.actor_inbox.put(("nodedown", peer))
        if was_up:
            for pid, infos in list(self._nodes_subs.items()):
                proc = self._local(pid)
                if proc is None:
                    continue
                for with_info in infos:
                    if with_info:
                        proc.actor_inbox.put(("nodedown", peer, {"nodedown_reason": reason}))
                    else:
                        proc.actor_inbox.put(("nodedown", peer))
        for waiter in self._ping_waiters.pop(peer, []):
            waiter.set("pang")
        if trace.enabled():
            trace.emit("nodedown", node=self.name, peer=peer, reason=reason)

    def dist_receive(self, peer: str, signals: list[tuple[Any, ...]]) -> None:
        """Carry out the signals of one frame, strictly in order."""
        procs = self.procs
        creation = self.creation
        for sig in signals:
            kind = sig[0]
            if kind == dist.SEND:
                if sig[2] == creation:
                    proc = procs.get(sig[1])
                    if proc is not None:
                        proc.actor_inbox.put(sig[3])
            elif kind == dist.SEND_NAME:
                proc = self.names.get(sig[1])
                if proc is not None:
                    proc.actor_inbox.put(sig[2])
            else:
                self._dist_control(peer, sig)

    def _dist_control(self, peer: str, sig: tuple[Any, ...]) -> None:
        kind = sig[0]
        if kind == dist.REPLY:
            _, serial, creation, tag, value = sig
            proc = self.procs.get(serial) if creation == self.creation else None
            if proc is not None:
                slot = proc.slots.get(tag)
                if slot is not None and not slot.ready():
                    slot.set(("reply", value))
        elif kind == dist.LINK:
            _, sender, serial, creation = sig
            proc = self.procs.get(serial) if creation == self.creation else None
            me = Pid(self.name, serial, creation)
            if proc is None or proc.dead:
                self._dist(peer, (dist.EXIT, me, sender.serial, sender.creation, "noproc", True))
            else:
                proc.links.add(sender)
                self._links_by_peer[peer].add((proc.pid, sender))
        elif kind == dist.UNLINK:
            _, sender, serial, creation = sig
            proc = self.procs.get(serial) if creation == self.creation else None
            if proc is not None:
                proc.links.discard(sender)
            self._links_by_peer[peer].discard((Pid(self.name, serial, creation), sender))
        elif kind == dist.EXIT:
            _, sender, serial, creation, reason, is_link = sig
            if is_link:
                self._links_by_peer[peer].discard((Pid(self.name, serial, creation), sender))
            proc = self.procs.get(serial) if creation == self.creation else None
            if proc is not None:
                self._exit_signal(proc, sender, reason, is_link)
        elif kind == dist.MONITOR:
            _, watcher, key, ref = sig
            if type(key) is tuple:
                serial, creation = key
                proc = self.procs.get(serial) if creation == self.creation else None
                obj: Any = Pid(self.name, serial, creation)
            else:
                proc = self.names.get(key)
                obj = (key, self.name)
            if proc is None or proc.dead:
                self._dist(peer, (dist.DOWN, watcher.serial, watcher.creation, ref, obj, "noproc"))
            else:
                proc.watchers[ref] = (watcher, obj)
                self._in_mons[peer][ref] = proc.pid
        elif kind == dist.DEMONITOR:
            _, _watcher, _serial, ref = sig
            target = self._in_mons[peer].pop(ref, None)
            if target is not None:
                proc = self._local(target)
                if proc is not None:
                    proc.watchers.pop(ref, None)
        elif kind == dist.DOWN:
            _, serial, creation, ref, obj, reason = sig
            self._out_mons[peer].pop(ref, None)
            proc = self.procs.get(serial) if creation == self.creation else None
            if proc is not None:
                self._deliver_down(proc, ref, obj, reason)
        elif kind == dist.SPAWN_REQUEST:
            self._on_spawn_request(peer, sig)
        elif kind == dist.SPAWN_REPLY:
            _, serial, creation, ref, result = sig
            self._pending_spawns[peer].pop(ref, None)
            proc = self.procs.get(serial) if creation == self.creation else None
            if proc is not None:
                slot = proc.slots.get(ref)
                if slot is not None and not slot.ready():
                    opts = self._spawn_opts.pop(ref, None)
                    if opts is not None and isinstance(result, Pid):
                        # Now, not when the caller wakes: an EXIT or DOWN of
                        # the new process may follow in this same frame.
                        link, mref = opts
                        if link:
                            proc.links.add(result)
                            self._links_by_peer[peer].add((proc.pid, result))
                        if mref is not None:
                            proc.monitors[mref] = result
                            self._out_mons[peer][mref] = proc.pid
                    slot.set(result)
        else:
            log.warning("node %s: unknown signal %r from %s", self.name, kind, peer)

    def _on_spawn_request(self, peer: str, sig: tuple[Any, ...]) -> None:
        _, caller, ref, payload, link, mref = sig
        try:
            fn, args = pickle.loads(payload)
        except Exception as exc:
            self._dist(peer, (dist.SPAWN_REPLY, caller.serial, caller.creation, ref,
                              ("badarg", repr(exc))))
            return
        pid = self._new_pid()
        proc = Process(self, pid, fn, tuple(args))
        self.procs[pid.serial] = proc
        if link:
            proc.links.add(caller)
            self._links_by_peer[peer].add((pid, caller))
        if mref is not None:
            proc.watchers[mref] = (caller, pid)
            self._in_mons[peer][mref] = pid
        self._dist(peer, (dist.SPAWN_REPLY, caller.serial, caller.creation, ref, pid))
        proc._start_actor_loop()

    # ------------------------------------------------------------ replies

    def reply(self, to: tuple[Pid, Ref], value: Any) -> None:
        """Answer a `call`: out of band, keyed by the call's tag; late replies vanish."""
        pid, tag = to
        if pid.node == self.name:
            proc = self._local(pid)
            if proc is not None:
                slot = proc.slots.get(tag)
                if slot is not None and not slot.ready():
                    slot.set(("reply", value))
        elif not self._stale(pid):
            self._dist(pid.node, (dist.REPLY, pid.serial, pid.creation, tag, value))


def this_node() -> Node:
    """The node of the calling process."""
    return current().node
