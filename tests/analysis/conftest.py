"""One SparkSession for the whole analysis test session (JVM start is paid once)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from analysis import schema
from analysis.spark import get_session

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    # one JVM serves the whole suite, and every check run leaves broadcast tables behind
    # until the driver's garbage collector lets Spark clean them: 1g ran out now and
    # then, and 2g once (after full collections its old generation still held 0.6-1.2 GB
    # of its 1.3 GB, mostly Catalyst plan trees, with and without total_queue's summary)
    "spark.driver.memory": "3g",
    # tiny inputs: code generation and adaptive re-planning cost more than they save
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session("local[2]", conf=TEST_CONF, log_level="ERROR")
    yield session
    session.stop()


def arrow_tables(tables: dict[str, list[dict[str, Any]]]) -> dict[str, pa.Table]:
    """Rows per table as Arrow tables of the recorded schemas."""
    out = {}
    for t, rows in tables.items():
        names = schema.schema_of(t).names
        out[t] = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows],
                                      schema=schema.schema_of(t))
    return out
