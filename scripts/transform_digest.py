"""A digest of the shop transform's outputs on fixed purchases: proof that a refactor left its bytes alone.

    python scripts/transform_digest.py save PURCHASES.pkl        # generate the purchases once (seeded)
    python scripts/transform_digest.py digest PURCHASES.pkl      # run the transform, print the digest

Run ``digest`` with ``PYTHONPATH=<tree>/include`` for each tree (a worktree of the older commit, and this
one): the generator stamps purchases with the clock, so both read the same saved bytes. Local Spark, no
broker; the digest covers every output's partition, offset, topic, key, value and headers.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import pickle
from pathlib import Path


def save(path: Path) -> None:
    from eos_etl.shop.generator import hostile_purchases, purchases  # deferred: each command its own imports

    rows = [(key, value) for key, value, _kind in purchases(20_000, invalid_share=0.1, seed=7)]
    rows += list(hostile_purchases())
    path.write_bytes(pickle.dumps(rows))
    print(f"{len(rows)} purchases -> {path}")


def digest(path: Path) -> None:
    # deferred: Spark starts only for the digest
    from pyspark.sql import SparkSession
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    import eos_etl.shop.transform as transform

    rows = pickle.loads(path.read_bytes())
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                         StructField("timestampType", IntegerType())])
    at = datetime.datetime(2026, 1, 1)
    frame = spark.createDataFrame([(k, v, "purchases", i % 4, i // 4, at, 0) for i, (k, v) in enumerate(rows)], schema)
    h, outputs = hashlib.sha256(), 0
    for row in transform.purchases_to_outputs(frame).orderBy("partition", "offset").collect():
        h.update(repr((row["partition"], row["offset"])).encode())
        for output in row["outputs"]:
            h.update(repr(sorted(output.asDict(recursive=True).items())).encode())
            outputs += 1
    spark.stop()
    print(f"{transform.__file__}: {len(rows)} purchases, {outputs} outputs, sha256 {h.hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("save", "digest"))
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    (save if args.command == "save" else digest)(args.path)


if __name__ == "__main__":
    main()
