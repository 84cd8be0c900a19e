"""The bench's peers' shop transforms, Python (``eos_etl_lab.bench.peers.shop_python``, quixstreams') and Java
(``streams/ShopStreams.java``, Kafka Streams'), against Spark's (``eos_etl.shop.transform``) on the same
purchases: every output's topic, key, value and headers compared.

    python scripts/peer_parity.py [--count 20000] [--no-hostile]

Local Spark and a JVM, no broker. Prints the purchases compared and the outputs that differ (the first few),
and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import datetime
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--no-hostile", action="store_true", help="leave out the generator's hostile purchases")
    args = parser.parse_args()
    # deferred: Spark starts only when the script runs
    from pyspark.sql import SparkSession
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

    from eos_etl.shop import transform
    from eos_etl.shop.generator import hostile_purchases, purchases
    from eos_etl.shop.schema import ShopTopics
    from eos_etl.spark.config import REQUIRED_CONF  # the pipeline's session settings (its time zone)
    from eos_etl_lab.bench.peers.contract import shop_contract
    from eos_etl_lab.bench.peers.shop_python import Contract, outputs

    rows = [(key, value) for key, value, _kind in purchases(args.count, invalid_share=0.1, seed=7)]
    if not args.no_hostile:
        rows += list(hostile_purchases())
    topics = ShopTopics()
    contract = Contract.from_json(shop_contract(topics.purchases, *topics.outputs))
    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                         StructField("timestampType", IntegerType())])
    at = datetime.datetime(2026, 1, 1, 12, 30, 45, 678000, tzinfo=datetime.timezone.utc)
    frame = spark.createDataFrame([(k, v, topics.purchases, i % 4, i // 4, at, 0) for i, (k, v) in enumerate(rows)],
                                  schema)
    at_ms = int(at.timestamp() * 1000)
    differ, compared, by_index = [], 0, {}
    for row in transform.purchases_to_outputs(frame, topics).collect():
        i = row["offset"] * 4 + row["partition"]
        key, value = rows[i]
        spark_out = [(o["topic"], o["key"], o["value"], [(h["key"], bytes(h["value"])) for h in o["headers"]])
                     for o in row["outputs"]]
        spark_out = [(t, bytes(k) if k is not None else None, bytes(v) if v is not None else None, h)
                     for t, k, v, h in spark_out]
        by_index[i] = spark_out
        python_out = outputs(key, value, row["partition"], row["offset"], at_ms, contract)
        compared += 1
        if spark_out != python_out:
            differ.append((i, value[:300] if value else value, spark_out, python_out))
    spark.stop()
    java = _java_outputs(rows, contract, at_ms)
    for i, spark_out in sorted(by_index.items()):
        if java[i] != spark_out:
            differ.append((i, rows[i][1][:300] if rows[i][1] else rows[i][1], spark_out, java[i]))
    print(f"{compared} purchases compared with the Python and the Java transform, {len(differ)} outputs differ")
    for i, value, spark_out, python_out in differ[:8]:
        print(f"- purchase {i}: {value!r}\n  spark: {spark_out!r}\n  peer:  {python_out!r}")
    return 1 if differ else 0


def _java_outputs(rows, contract, at_ms: int) -> list:
    """Each purchase's outputs as ``ShopStreams parity`` makes them (a file in, a file out)."""
    import struct
    import subprocess
    import tempfile
    from dataclasses import asdict
    from pathlib import Path

    from eos_etl_lab.bench.peers import kafka_streams
    from eos_etl_lab.bench.peers.contract import LINEAGE_HEADERS

    def put(b):
        return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b

    with tempfile.TemporaryDirectory() as work:
        spec, src, dst = Path(work) / "spec.properties", Path(work) / "in", Path(work) / "out"
        as_json = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(contract).items()}
        kafka_streams.write_spec(spec, as_json, LINEAGE_HEADERS, {"run_id": "parity", "topic_id": "-", "group": "-"})
        src.write_bytes(struct.pack(">i", len(rows)) + b"".join(
            struct.pack(">iqq", i % 4, i // 4, at_ms) + put(k) + put(v) for i, (k, v) in enumerate(rows)))
        subprocess.run(["java", "-cp", kafka_streams.classpath(), "ShopStreams", "parity", str(spec), str(src),
                        str(dst)], check=True)
        data, at = dst.read_bytes(), 0

    def take(fmt):
        nonlocal at
        (v,) = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return v

    def take_bytes():
        nonlocal at
        n = take(">i")
        if n < 0:
            return None
        at += n
        return data[at - n:at]

    def take_utf():
        nonlocal at
        n = take(">H")
        at += n
        return data[at - n:at].decode()

    out = []
    for _ in range(take(">i")):
        made = []
        for _ in range(take(">i")):
            topic, key, value = take_utf(), take_bytes(), take_bytes()
            made.append((topic, key, value, [(take_utf(), take_bytes()) for _ in range(take(">i"))]))
        out.append(made)
    return out


if __name__ == "__main__":
    sys.exit(main())
