"""gen_server: start, call outcomes, return shapes, terminate."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from actors import CallExit, Node, gen_server
from actors.gen_server import GenServer
from tests.actors.helpers import collect, nothing_more


class Counter(GenServer):
    """A counter with one request for every return shape the spec lists."""

    def init(self, args: Any) -> Any:
        match args:
            case ("stop", reason):
                return ("stop", reason)
            case "ignore":
                return "ignore"
            case "crash":
                raise ValueError("bad init")
            case "bad":
                return ("what",)
            case ("sleep", ms):
                actors.sleep(ms)
                return ("ok", 0)
            case ("trap", report_to):
                actors.process_flag("trap_exit", True)
                return ("ok", {"report_to": report_to, "n": 0})
            case ("continue", report_to):
                return ("ok", {"report_to": report_to, "n": 0}, ("continue", "warm"))
            case _:
                return ("ok", args)

    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        match request:
            case "get":
                return ("reply", state, state)
            case "inc":
                return ("reply", "ok", state + 1)
            case "later":
                actors.send(actors.self(), ("answer", from_))
                return ("noreply", state)
            case ("sleep", ms):
                actors.sleep(ms)
                return ("reply", "slept", state)
            case "crash":
                raise RuntimeError("handler crashed")
            case "stop_normal":
                return ("stop", "normal", state)
            case ("stop_reply", reason):
                return ("stop", reason, "bye", state)
            case "bad":
                return "nonsense"
            case "idle":
                return ("reply", "ok", state, 30)
        raise AssertionError(request)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        if msg == "inc":
            return ("noreply", state + 1)
        return ("stop", msg, state)

    def handle_info(self, msg: Any, state: Any) -> Any:
        if isinstance(msg, tuple) and msg[0] == "answer":
            gen_server.reply(msg[1], ("late answer", state))
            return ("noreply", state)
        if msg == "timeout":
            actors.send(state["report_to"] if isinstance(state, dict) else msg, "idle timeout")
            return ("noreply", state)
        if isinstance(state, dict):
            actors.send(state["report_to"], ("info", msg))
        return ("noreply", state)

    def handle_continue(self, cont: Any, state: Any) -> Any:
        actors.send(state["report_to"], ("continued", cont))
        return ("noreply", state)

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, dict):
            actors.send(state["report_to"], ("terminate", reason))


def test_start_link_returns_ok_pid_and_serves_calls(a: Node) -> None:
    with a.attached():
        ok, pid = gen_server.start_link(Counter, 0)
        assert ok == "ok"
        assert gen_server.call(pid, "inc") == "ok"
        gen_server.cast(pid, "inc")
        assert gen_server.call(pid, "get") == 2
        assert gen_server.call(pid, "later") == ("late answer", 2)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("stop", ("shutdown", "no")), ("error", ("shutdown", "no"))),
        ("ignore", "ignore"),
        ("bad", ("error", ("bad_return_value", ("what",)))),
    ],
)
def test_start_results(a: Node, args: Any, expected: Any) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        assert gen_server.start_link(Counter, args, name="ctr") == expected
        # the name was released before we were told: a retry can start at once
        assert actors.whereis("ctr") is None
        ok, _pid = gen_server.start_link(Counter, 0, name="ctr")
        assert ok == "ok"
        assert nothing_more(20)  # the failed child's EXIT was flushed


def test_start_crash_reports_the_traceback(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        result = gen_server.start_link(Counter, "crash")
        assert result[0] == "error"
        assert result[1][:3] == ("exception", "ValueError", "bad init")


def test_already_started_and_init_timeout(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        ok, pid = gen_server.start_link(Counter, 0, name="one")
        assert gen_server.start_link(Counter, 0, name="one") == ("error", ("already_started", pid))
        assert gen_server.start_link(Counter, ("sleep", 500), timeout=30) == ("error", "timeout")


def test_call_timeout_and_late_reply_dropped(a: Node) -> None:
    with a.attached():
        _, pid = gen_server.start(Counter, 0)
        with pytest.raises(CallExit) as info:
            gen_server.call(pid, ("sleep", 100), timeout=20)
        assert info.value.why == "timeout"
        assert info.value.reason[1] == ("gen_server", "call", [pid, ("sleep", 100), 20])
        actors.sleep(150)
        assert nothing_more(20)  # the late reply never reaches the mailbox
        assert gen_server.call(pid, "get") == 0


def test_call_noproc_for_dead_pid_and_unknown_name(a: Node, b: Node) -> None:
    with a.attached():
        dead = actors.spawn(lambda: None)
        actors.sleep(10)
        for target in (dead, "nobody", ("nobody", a.name), ("nobody", b.name)):
            with pytest.raises(CallExit) as info:
                gen_server.call(target, "get")
            assert info.value.why == "noproc", target


def test_call_nodedown(a: Node, b: Node) -> None:
    with a.attached():
        remote = b.spawn(_swallow_all)
        actors.sleep(10)

        def cut() -> None:
            actors.sleep(20)
            actors.disconnect_node(b.name)

        actors.spawn(cut)
        with pytest.raises(CallExit) as info:
            gen_server.call(remote, "never answered", timeout=2000)
        assert info.value.why == ("nodedown", b.name)


def _swallow_all() -> None:
    while True:
        actors.receive()


def test_call_remote_server_by_name(a: Node, b: Node) -> None:
    with a.attached():
        def start_there() -> None:
            gen_server.start(Counter, 41, name="ctr")
            actors.receive()

        b.spawn(start_there)
        actors.sleep(20)
        assert gen_server.call(("ctr", b.name), "inc") == "ok"
        assert gen_server.call(("ctr", b.name), "get") == 42


def test_calling_self(a: Node) -> None:
    with a.attached() as me:
        with pytest.raises(CallExit) as info:
            gen_server.call(me.pid, "x")
        assert info.value.why == "calling_self"


def test_server_stopping_normal_during_call_gives_normal(a: Node) -> None:
    with a.attached():
        _, pid = gen_server.start(Counter, 0)
        with pytest.raises(CallExit) as info:
            gen_server.call(pid, "stop_normal")
        assert info.value.why == "normal"


def test_server_crash_during_call_gives_its_reason(a: Node) -> None:
    with a.attached():
        _, pid = gen_server.start(Counter, 0)
        ref = actors.monitor(pid)
        with pytest.raises(CallExit) as info:
            gen_server.call(pid, "crash")
        why = info.value.why
        assert why[:3] == ("exception", "RuntimeError", "handler crashed")
        assert collect(1) == [("DOWN", ref, "process", pid, why)]


def test_bad_return_value_stops_the_server(a: Node) -> None:
    with a.attached():
        _, pid = gen_server.start(Counter, 0)
        with pytest.raises(CallExit) as info:
            gen_server.call(pid, "bad")
        assert info.value.why == ("bad_return_value", "nonsense")


def test_stop_with_reply_sends_reply_after_terminate(a: Node) -> None:
    with a.attached() as me:
        _, pid = gen_server.start(Counter, ("trap", me.pid))
        assert gen_server.call(pid, ("stop_reply", "shutdown")) == "bye"
        assert collect(1) == [("terminate", "shutdown")]


def test_continue_and_idle_timeout(a: Node) -> None:
    with a.attached() as me:
        _, pid = gen_server.start(Counter, ("continue", me.pid))
        assert collect(1) == [("continued", "warm")]
        assert gen_server.call(pid, "idle") == "ok"
        assert collect(1) == ["idle timeout"]


def test_cast_always_ok(a: Node) -> None:
    with a.attached():
        dead = actors.spawn(lambda: None)
        actors.sleep(10)
        assert gen_server.cast(dead, "x") == "ok"
        assert gen_server.cast("nobody", "x") == "ok"


def test_send_request_and_wait_response(a: Node) -> None:
    with a.attached():
        _, pid = gen_server.start(Counter, 7)
        req = gen_server.send_request(pid, ("sleep", 30))
        assert gen_server.wait_response(req, 0) == "timeout"
        assert gen_server.wait_response(req, 1000) == ("reply", "slept")


# -- terminate matrix: trap_exit x (shutdown | kill | stop) -------------------


@pytest.mark.parametrize(
    ("trap", "how", "terminate_runs", "exit_reason"),
    [
        (True, "shutdown", True, "shutdown"),
        (False, "shutdown", False, "shutdown"),
        (True, "kill", False, "killed"),
        (False, "kill", False, "killed"),
        (True, "stop", True, "normal"),
        (False, "stop", True, "normal"),
    ],
)
def test_terminate_matrix(a: Node, trap: bool, how: str, terminate_runs: bool,
                          exit_reason: str) -> None:
    with a.attached() as me:
        actors.process_flag("trap_exit", True)
        args = ("trap", me.pid) if trap else {"report_to": me.pid, "n": 0}
        _, pid = gen_server.start_link(Counter, args)
        ref = actors.monitor(pid)
        if how == "stop":
            assert gen_server.stop(pid) == "ok"
        else:
            actors.exit(pid, how)  # from the parent: a trapped EXIT means terminate
        got = collect(3 if terminate_runs else 2)
        assert (("terminate", exit_reason) in got) is terminate_runs
        assert ("DOWN", ref, "process", pid, exit_reason) in got
        assert ("EXIT", pid, exit_reason) in got


def test_exit_from_non_parent_goes_to_handle_info(a: Node) -> None:
    with a.attached() as me:
        _, pid = gen_server.start(Counter, ("trap", me.pid))
        stranger = actors.spawn(actors.receive)
        actors.exit(pid, "shutdown")  # we are not its parent (started without link)
        assert collect(1) == [("info", ("EXIT", me.pid, "shutdown"))]
        del stranger
