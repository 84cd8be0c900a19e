"""The window profile's fingerprints (eos_etl.quality.profile), computed by a real SparkSession.

The profile's decisions: tests/unit/quality/test_profile.py."""

from __future__ import annotations

from pyspark.sql import functions as F

from eos_etl.quality.fingerprint import fingerprint


def test_fingerprints_tell_a_repeated_record_from_the_one_it_replaced(spark):
    def fp(rows):
        df = spark.createDataFrame(rows, "p int, o bigint")
        return df.agg(F.count(F.lit(1)), F.sum(fingerprint(F.col("p"), F.col("o")))).first()

    window = [(0, 1), (0, 2), (1, 1)]
    assert fp(window) == fp(list(reversed(window)))  # order does not matter
    assert fp([(0, 1), (0, 1), (1, 1)])[0] == fp(window)[0]
    assert fp([(0, 1), (0, 1), (1, 1)])[1] != fp(window)[1]  # same count, not the same records
    assert fp([(1, 2), (0, 1), (1, 1)])[1] != fp(window)[1]  # a partition and an offset swapped
