"""`warren ctl` usage errors: found before any node is contacted, one line, status 64."""

from __future__ import annotations

import pytest

from tests.broker.broker_support import ctl


@pytest.mark.parametrize("node", ["foo", "a@b", "a@host:notaport", "@host:5672",
                                  "a@host:0", "a@host:70000", "a@b@host:5672"])
def test_a_malformed_node_name_is_a_usage_error_not_an_unreachable_node(node: str) -> None:
    out = ctl(node, "list_queues")
    assert out.returncode == 64
    assert out.stderr == f"Error: invalid node name '{node}': expected name@host:port\n"
    assert out.stdout == ""
