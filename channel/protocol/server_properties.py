"""What `connection.start` says the server is.

Clients switch behaviour on these properties (Celery decides whether to use
global QoS from the product and version), so a node sends what the RabbitMQ
release it models sends: `rabbit_reader:server_properties/1`'s product,
version, platform, copyright, information and capabilities, plus the node's
`cluster_name`. The operator's `server_properties` setting adds keys or replaces
them, as RabbitMQ's does, except `capabilities`, which RabbitMQ always fills in
itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from releases import Release

__all__ = ["server_properties"]


def server_properties(release: Release, cluster_name: str,
                      configured: Mapping[str, Any]) -> dict[str, Any]:
    """The `server_properties` table of `connection.start`."""
    props: dict[str, Any] = {**release.server.properties(), "cluster_name": cluster_name}
    props.update((key, value) for key, value in configured.items() if key != "capabilities")
    return props
