"""The latency figures of `analysis.metrics` come from one aggregation: histograms per
series and fault label, the maximum of each, the end-to-end histogram of every second,
and the number of samples must be what each figure means on its own."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis import metrics
from analysis.model import Params

SEC = Params().bucket_ns
T0 = 1_000 * SEC


def test_histograms_maxima_and_seconds_from_one_aggregation(spark: SparkSession) -> None:
    rows = [  # series, label, b (bucket), start, lat
        ("end_to_end", "outside", 3, T0 + 10, 30),
        ("end_to_end", "outside", 3, T0 + SEC + 5, 35),
        ("end_to_end", "kill", 3, T0 + SEC + 7, 33),
        ("end_to_end", "kill", 5, T0 + SEC + 9, 90),
        ("publish_confirm", "outside", 3, T0 + 10, 31),
        ("publish_confirm", "outside", 3, T0 + 2 * SEC, 34),
    ]
    lat = spark.createDataFrame(rows, "series string, label string, b long, start long, "
                                      "lat long")
    m = metrics.Metrics(t0_ns=T0)
    n = metrics._histograms(m, lat, Params())
    assert n == 6
    assert m.hist == {("end_to_end", "outside"): {3: 2}, ("end_to_end", "kill"): {3: 1, 5: 1},
                      ("publish_confirm", "outside"): {3: 2}}
    assert m.max_ns == {("end_to_end", "outside"): 35, ("end_to_end", "kill"): 90,
                        ("publish_confirm", "outside"): 34}
    # per second only for end_to_end, over all labels
    assert m.hist_by_second == {("end_to_end", 0): {3: 1}, ("end_to_end", 1): {3: 2, 5: 1}}
