"""warren against the real RabbitMQ of the same release: every probe runs the same
client steps against both three-node clusters, and the observations must be equal.

The probes (`tests.differential.probes`) cover declare and redeclare errors,
requeue positions, the delivery limit and dead-letter headers, message TTL and
queue expiry, length limits, single active consumer, basic.get and a leader's node
killed under confirmed publishing. The leader kill runs last: it leaves each
cluster a node short. A probe runs against both clusters at once, each from a
thread of its own (the clusters share nothing, and much of a probe is waiting).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.differential.conftest import Pair
from tests.differential.probes import PROBES


@pytest.mark.parametrize("probe", list(PROBES))
def test_warren_observes_what_rabbitmq_does(pair: Pair, probe: str) -> None:
    with ThreadPoolExecutor(2) as pool:
        on_rabbitmq = pool.submit(PROBES[probe], pair.rabbitmq)
        on_warren = pool.submit(PROBES[probe], pair.warren)
        expected, observed = on_rabbitmq.result(), on_warren.result()
    assert json.dumps(observed, indent=1, sort_keys=True) == \
        json.dumps(expected, indent=1, sort_keys=True), \
        f"{pair.warren.name} differs from {pair.rabbitmq.name} in {probe}"
