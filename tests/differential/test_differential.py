"""warren against the real RabbitMQ of the same release: every probe runs the same
client steps against both three-node clusters, and the observations must be equal.

The probes (`tests.differential.probes`) cover declare and redeclare errors,
requeue positions, the delivery limit and dead-letter headers, message TTL and
queue expiry, length limits, single active consumer, basic.get and a leader's node
killed under confirmed publishing. The leader kill runs last: it leaves each
cluster a node short.
"""

from __future__ import annotations

import json

import pytest

from tests.differential.conftest import Pair
from tests.differential.probes import PROBES


@pytest.mark.parametrize("probe", list(PROBES))
def test_warren_observes_what_rabbitmq_does(pair: Pair, probe: str) -> None:
    expected = PROBES[probe](pair.rabbitmq)
    observed = PROBES[probe](pair.warren)
    assert json.dumps(observed, indent=1, sort_keys=True) == \
        json.dumps(expected, indent=1, sort_keys=True), \
        f"{pair.warren.name} differs from {pair.rabbitmq.name} in {probe}"
