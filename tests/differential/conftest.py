"""Two three-node clusters per release series, started once for the whole session:
the real RabbitMQ of that series and warren with `rabbitmq_version` set to it.

Both are stopped (and the RabbitMQ chroot unmounted) however the tests end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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


@pytest.fixture(scope="session", params=sorted(STARTERS))
def pair(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    series = request.param
    with STARTERS[series]() as real, warren(series, tmp_path_factory.mktemp("warren")) as ours:
        yield Pair(series, real, ours)
