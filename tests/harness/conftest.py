"""Fixtures for the harness tests: clusters of fake or real nodes, always cleaned up."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster, NodeSpec

FAKE_NODE = Path(__file__).with_name("fake_node.py")


def fake_argv(node: NodeSpec) -> list[str]:
    return [sys.executable, str(FAKE_NODE), "--config", str(node.config_file)]


class FakeCtl:
    """Answers `warren ctl` commands from a table and remembers every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.answers: dict[str, Any] = {}
        self.refuse: set[str] = set()

    def __call__(self, node: str, *args: str, timeout_s: float | None = None) -> Any:
        from harness.cluster import CtlError

        self.calls.append((node, args))
        command = next(a for a in args if not a.startswith("-") and a != "/")
        if command in self.refuse:
            raise CtlError(64, f"no command {command}")
        answer = self.answers.get(command, "ok")
        return answer(node, args) if callable(answer) else answer

    def commands(self, name: str) -> list[tuple[str, tuple[str, ...]]]:
        return [(n, a) for n, a in self.calls if name in a]


@pytest.fixture
def fake_ctl() -> FakeCtl:
    return FakeCtl()


@pytest.fixture
def fake_cluster(tmp_path: Path, fake_ctl: FakeCtl) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, 3, history_dir=tmp_path, node_argv=fake_argv, ctl=fake_ctl)
    try:
        yield cluster
    finally:
        cluster.close()
