"""One SparkSession for the whole analysis test session (JVM start is paid once)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from analysis import schema
from analysis.spark import SMALL_HISTORIES_CONF, get_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session("local[2]", conf=SMALL_HISTORIES_CONF, log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _drop_cached_frames(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every Spark test leaves the shared session with nothing cached or stored, whether
    or not it dropped its history: a cached frame keeps its plan and broadcast tables
    alive, a derived frame its rows."""
    yield
    if "spark" in request.fixturenames:
        spark = request.getfixturevalue("spark")
        spark.catalog.clearCache()
        for rdd in spark.sparkContext._jsc.getPersistentRDDs().values():
            rdd.unpersist(True)  # the derived frames' stored rows (`History.cached`)


def arrow_tables(tables: dict[str, list[dict[str, Any]]]) -> dict[str, pa.Table]:
    """Rows per table as Arrow tables of the recorded schemas."""
    out = {}
    for t, rows in tables.items():
        names = schema.schema_of(t).names
        out[t] = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows],
                                      schema=schema.schema_of(t))
    return out
