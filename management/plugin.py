"""The management plugin as the `warren` command enables it on the nodes it starts.

This module stays light: the command imports it while building its parser, and
only a node that serves the API loads Flask, prometheus_client and the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors import gen_server

if TYPE_CHECKING:
    from broker.node import BrokerNode

__all__ = ["CHILD", "plugin"]

CHILD = "rabbit_mgmt_sup"


def _start(broker: BrokerNode) -> Any:
    from management.server import ManagementServer

    return gen_server.start_link(ManagementServer, broker, name=CHILD)


def plugin(broker: BrokerNode) -> list[dict[str, Any]]:
    """One child under `warren_sup`, none when neither listener has a port."""
    cfg = broker.config
    if cfg.management_port is None and cfg.prometheus_port is None:
        return []
    return [{"id": CHILD, "start": (_start, [broker])}]
