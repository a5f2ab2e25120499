"""A node's quorum-queue members save a recovery checkpoint as their release does:
4.3's `rabbit_quorum_queue` gives each member `min_recovery_checkpoint_interval`
100000, earlier releases leave Ra's default (0: never). The `ra` table's key wins
over the release's."""

from __future__ import annotations

import pytest

from broker.config import NodeConfig
from broker.node import ra_system_config
from ra.recovery_checkpoint import CONFIG_KEY, interval

NAME = "a@127.0.0.1:25671"


@pytest.mark.parametrize(("series", "expected"), [("3.10", 0), ("4.0", 0), ("4.2", 0),
                                                  ("4.3", 100_000)])
@pytest.mark.parametrize("data_dir", [None, "var/a"])
def test_a_member_naming_no_interval_takes_its_release_default(
        series: str, expected: int, data_dir: str | None) -> None:
    system = ra_system_config(NodeConfig(NAME, rabbitmq_version=series, data_dir=data_dir))
    assert interval({}, system) == expected


def test_the_ra_table_sets_the_interval_whatever_the_release() -> None:
    system = ra_system_config(NodeConfig(NAME, rabbitmq_version="4.3",
                                         ra={CONFIG_KEY: 500}))
    assert interval({}, system) == 500
    # a member's own config still wins over the node's
    assert interval({CONFIG_KEY: 7}, system) == 7
