"""gen_batch_server: batches of cast / call / info operations, replies as actions,
batch size adaptation, continue, stop, terminate and crashes."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from actors import CallExit, Node, gen, gen_batch_server
from actors.gen_batch_server import GenBatchServer
from tests.actors.helpers import collect, nothing_more


class Recorder(GenBatchServer):
    """Reports every batch it gets to `report_to`; what a call asks for is what
    the batch returns, so one server exercises every return shape."""

    def init(self, args: Any) -> Any:
        match args:
            case ("stop", reason):
                return ("stop", reason)
            case ("error", reason):
                return ("error", reason)
            case "ignore":
                return "ignore"
            case "crash":
                raise ValueError("bad init")
            case "bad":
                return ("what",)
        report_to, options = args
        if "trap" in options:
            actors.process_flag("trap_exit", True)
        if "continue" in options:
            return ("ok", report_to, ("continue", "warm"))
        return ("ok", report_to)

    def handle_batch(self, ops: list[Any], state: Any) -> Any:
        actors.send(state, ("batch", ops))
        actions: list[Any] = []
        for op in ops:
            match op:
                case ("call", _, "crash") | ("cast", "crash"):
                    raise RuntimeError("batch crashed")
                case ("cast", ("stop", reason)):
                    return ("stop", reason)
                case ("cast", "bad"):
                    return "nonsense"
                case ("cast", "continue"):
                    return ("ok", actions, state, ("continue", "after"))
                case ("cast", "gc"):
                    actions.append("garbage_collect")
                case ("call", from_, request):
                    actions.append(("reply", from_, ("got", request)))
        return ("ok", actions, state) if actions else ("ok", state)

    def handle_continue(self, cont: Any, state: Any) -> Any:
        actors.send(state, ("continued", cont))
        return ("ok", state)

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, actors.Pid):
            actors.send(state, ("terminate", reason))


def start(*options: str, **sizes: Any) -> actors.Pid:
    ok, pid = gen_batch_server.start_link(Recorder, (actors.self(), options), **sizes)
    assert ok == "ok"
    return pid


def batches(timeout: int = 2000) -> list[list[Any]]:
    """Every batch reported until the server has been quiet for a while."""
    out = []
    while (msg := actors.receive(timeout)) is not actors.TIMEOUT:
        assert msg[0] == "batch", msg
        out.append(msg[1])
        timeout = 50
    return out


def test_a_batch_is_everything_in_the_mailbox_in_arrival_order(a: Node) -> None:
    with a.attached() as me:
        pid = start()
        # the server runs only when this process waits: all of it is queued by then
        gen_batch_server.cast(pid, "c1")
        actors.send(pid, "i1")
        ref = gen.send_request(pid, "q1")
        gen_batch_server.cast(pid, "c2")
        assert batches() == [[("cast", "c1"), ("info", "i1"),
                              ("call", (me.pid, ref), "q1"), ("cast", "c2")]]
        assert gen.wait_response(ref, 1000) == ("reply", ("got", "q1"))


def test_every_call_of_a_batch_gets_its_own_reply(a: Node) -> None:
    with a.attached():
        pid = start()
        refs = [gen.send_request(pid, n) for n in range(5)]
        assert [len(b) for b in batches()] == [5]
        assert [gen.wait_response(r, 1000) for r in refs] == \
            [("reply", ("got", n)) for n in range(5)]
        assert gen_batch_server.call(pid, "alone") == ("got", "alone")


@pytest.mark.parametrize(
    ("sizes", "queued", "expected"),
    [
        # the batch size starts at the minimum and doubles after each full batch
        ({"min_batch_size": 2, "max_batch_size": 8}, 20, [2, 4, 8, 6]),
        # ... never past the maximum
        ({"min_batch_size": 4, "max_batch_size": 4}, 10, [4, 4, 2]),
        # upstream's defaults: 32 first, then 64
        ({}, 100, [32, 64, 4]),
        # a fixed size as large as the mailbox: one batch
        ({"min_batch_size": 8192, "max_batch_size": 8192}, 100, [100]),
    ],
)
def test_a_batch_holds_at_most_the_current_batch_size(
    a: Node, sizes: dict[str, int], queued: int, expected: list[int]
) -> None:
    with a.attached():
        pid = start(**sizes)
        for n in range(queued):
            gen_batch_server.cast(pid, n)
        got = batches()
        assert [len(b) for b in got] == expected
        assert [op for b in got for op in b] == [("cast", n) for n in range(queued)]


def test_the_batch_size_halves_when_the_mailbox_runs_dry(a: Node) -> None:
    with a.attached():
        pid = start(min_batch_size=2, max_batch_size=16)
        for n in range(14):  # batches of 2, 4, 8: the size is now 16
            gen_batch_server.cast(pid, n)
        assert [len(b) for b in batches()] == [2, 4, 8]
        gen_batch_server.cast(pid, "one")  # cut short by an empty mailbox: 16 -> 8
        assert batches() == [[("cast", "one")]]
        for n in range(20):
            gen_batch_server.cast(pid, n)
        assert [len(b) for b in batches()] == [8, 12]


def test_cast_batch_counts_each_element_towards_the_batch_size(a: Node) -> None:
    with a.attached():
        pid = start(min_batch_size=4, max_batch_size=4)
        gen_batch_server.cast_batch(pid, ["a", "b", "c"])
        gen_batch_server.cast(pid, "d")
        gen_batch_server.cast(pid, "e")
        assert batches() == [[("cast", "a"), ("cast", "b"), ("cast", "c"), ("cast", "d")],
                             [("cast", "e")]]
        with pytest.raises(TypeError):
            gen_batch_server.cast_batch(pid, ("not", "a", "list"))


def test_reversed_batch_hands_the_operations_newest_first(a: Node) -> None:
    with a.attached():
        pid = start(reversed_batch=True)
        for n in range(3):
            gen_batch_server.cast(pid, n)
        assert batches() == [[("cast", 2), ("cast", 1), ("cast", 0)]]


def test_continue_runs_after_init_and_after_a_batch(a: Node) -> None:
    with a.attached():
        pid = start("continue")
        assert actors.receive(1000) == ("continued", "warm")
        gen_batch_server.cast(pid, "continue")
        assert collect(2) == [("batch", [("cast", "continue")]), ("continued", "after")]


def test_garbage_collect_is_an_action_the_server_accepts(a: Node) -> None:
    with a.attached():
        pid = start()
        gen_batch_server.cast(pid, "gc")
        assert batches() == [[("cast", "gc")]]
        assert gen_batch_server.call(pid, "still there") == ("got", "still there")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("stop", ("shutdown", "no")), ("error", ("shutdown", "no"))),
        (("error", "nope"), ("error", "nope")),
        ("ignore", "ignore"),
        ("bad", ("error", ("bad_return_value", ("what",)))),
    ],
)
def test_start_results(a: Node, args: Any, expected: Any) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        assert gen_batch_server.start_link(Recorder, args, name="rec") == expected
        assert actors.whereis("rec") is None
        ok, _pid = gen_batch_server.start_link(Recorder, (actors.self(), ()), name="rec")
        assert ok == "ok"
        assert nothing_more(20)


def test_a_crash_in_init_is_the_start_error(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        result = gen_batch_server.start_link(Recorder, "crash")
        assert result[0] == "error"
        assert result[1][:3] == ("exception", "ValueError", "bad init")


def test_an_exit_from_the_trapping_server_s_parent_runs_terminate(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        pid = start("trap")
        actors.exit(pid, "shutdown")
        assert collect(2) == [("terminate", "shutdown"), ("EXIT", pid, "shutdown")]


def test_a_crash_in_handle_batch_runs_terminate_and_exits_with_the_crash(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        pid = start()
        gen_batch_server.cast(pid, "crash")
        batch, (tag, reason), (exit_tag, from_, exit_reason) = collect(3)
        assert batch == ("batch", [("cast", "crash")])
        assert tag == "terminate" and reason[:3] == ("exception", "RuntimeError",
                                                     "batch crashed")
        assert (exit_tag, from_, exit_reason) == ("EXIT", pid, reason)


def test_a_caller_of_a_crashing_batch_gets_the_crash_reason(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        pid = start()
        with pytest.raises(CallExit) as info:
            gen_batch_server.call(pid, "crash")
        assert info.value.why[:2] == ("exception", "RuntimeError")
        assert info.value.reason[1] == ("gen_batch_server", "call", [pid, "crash", 5000])


@pytest.mark.parametrize(
    ("cast", "reason"),
    [
        (("stop", "normal"), "normal"),
        (("stop", ("shutdown", "done")), ("shutdown", "done")),
        ("bad", ("bad_return_value", "nonsense")),
    ],
)
def test_stop_and_bad_returns_of_handle_batch(a: Node, cast: Any, reason: Any) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        pid = start()
        gen_batch_server.cast(pid, cast)
        assert collect(3) == [("batch", [("cast", cast)]), ("terminate", reason),
                              ("EXIT", pid, reason)]


def test_stop_runs_terminate(a: Node) -> None:
    with a.attached():
        pid = start()
        assert gen_batch_server.stop(pid, "normal") == "ok"
        assert collect(1) == [("terminate", "normal")]
        assert not actors.is_process_alive(pid)


def test_format_status_shows_the_callback_s_view_of_the_state(a: Node) -> None:
    class Status(Recorder):
        def format_status(self, state: Any) -> Any:
            return [("reporting to", state)]

    with a.attached() as me:
        status = gen_batch_server.format_status("wal", Status(), me.pid, me.pid)
        assert status == [("header", "Status for batching server wal"),
                          ("data", [("Status", "running"), ("Parent", me.pid),
                                    ("Logged Events", [])]),
                          ("reporting to", me.pid)]
        assert gen_batch_server.format_status("x", Recorder(), me.pid, 7)[-1] == 7


def test_the_behaviour_is_part_of_the_actors_package() -> None:
    assert "gen_batch_server" in actors.__all__
    assert actors.gen_batch_server.start_link is gen_batch_server.start_link
