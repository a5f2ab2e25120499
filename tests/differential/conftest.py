"""Two three-node clusters per release series, started once for the whole session:
the real RabbitMQ of that series and warren with `rabbitmq_version` set to it.

The two start side by side (each start mostly waits for its nodes to boot), and
the next series' two start in the background while the tests of the series
before it run. Every cluster is stopped (and the RabbitMQ chroot unmounted)
however the tests end, also when only one of a pair started; a series' pair is
stopped when its tests are done.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker.broker_support import running_cluster
from tests.differential.probes import Target
from tests.differential.real_brokers import STARTERS


@dataclass
class Pair:
    series: str
    rabbitmq: Target
    warren: Target


@contextmanager
def warren(series: str, base: Path) -> Iterator[Target]:
    """Three warren nodes behaving as `series`."""
    with running_cluster(base, extra=["--rabbitmq-version", series]) as nodes:
        def kill(index: int) -> None:
            proc = nodes[index].proc
            assert proc is not None
            proc.kill()
            proc.wait()

        yield Target(f"warren {series}", [b.amqp_port for b in nodes], kill)


@contextmanager
def started_together(*clusters: AbstractContextManager[Target]) -> Iterator[list[Target]]:
    """Enter every context manager at once, each in a thread of its own; leave those
    that were entered however the block ends, and raise the first start's error."""
    with ExitStack() as stack:
        with ThreadPoolExecutor(len(clusters)) as pool:
            starts = [pool.submit(cm.__enter__) for cm in clusters]
        targets, errors = [], []
        for cm, start in zip(clusters, starts, strict=True):
            try:
                targets.append(start.result())
            except BaseException as exc:  # re-raised below, after the rest
                errors.append(exc)
            else:
                stack.push(cm.__exit__)
        if errors:
            raise errors[0]
        yield targets


class Pairs:
    """Each series' pair, started when its tests first need it or, for the series
    after it in `order`, in the background as soon as that pair is up."""

    def __init__(self, order: list[str], base: pytest.TempPathFactory) -> None:
        self._order = order
        self._base = base
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="differential-start")
        self._starts: dict[str, Future[tuple[ExitStack, Pair]]] = {}

    def _start(self, series: str) -> tuple[ExitStack, Pair]:
        with ExitStack() as stack:
            real, ours = stack.enter_context(started_together(
                STARTERS[series](), warren(series, self._base.mktemp("warren"))))
            return stack.pop_all(), Pair(series, real, ours)

    def _submit(self, series: str) -> Future[tuple[ExitStack, Pair]]:
        if series not in self._starts:
            self._starts[series] = self._pool.submit(self._start, series)
        return self._starts[series]

    def take(self, series: str) -> Pair:
        """`series`' pair once it is up; the next series' starts meanwhile."""
        _stack, pair = self._submit(series).result()
        later = self._order[self._order.index(series) + 1:] if series in self._order else []
        if later:
            self._submit(later[0])
        return pair

    def stop(self, series: str) -> None:
        """Stop `series`' pair (waiting for its start to end first)."""
        start = self._starts.pop(series, None)
        if start is None:
            return
        try:
            stack, _pair = start.result()
        except BaseException:  # its start failed, and left nothing running
            return
        stack.close()

    def close(self) -> None:
        for series in list(self._starts):
            self.stop(series)
        self._pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def pairs(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pairs]:
    """The series whose tests this session runs, in the order they run."""
    order: list[str] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        series = callspec.params.get("pair") if callspec is not None else None
        if isinstance(series, str) and series not in order:
            order.append(series)
    started = Pairs(order, tmp_path_factory)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="session", params=sorted(STARTERS))
def pair(request: pytest.FixtureRequest, pairs: Pairs) -> Iterator[Pair]:
    series = request.param
    try:
        yield pairs.take(series)
    finally:
        pairs.stop(series)
