"""arrow_codec.arrow_records: the publishing task's Arrow -> records conversion equals the plain to_pylist one."""

from __future__ import annotations

import pyarrow as pa

from eos_etl.engine.tasks.arrow_codec import arrow_records, result_batch
from eos_etl.engine.tasks.publish_task import ReadTimer

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
OUTPUT = pa.struct([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                    ("headers", pa.list_(HEADER))])
SCHEMA = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("outputs", pa.list_(OUTPUT))])


def reference(batch):
    for offset, outs in zip(batch.column("offset").to_pylist(), batch.column("outputs").to_pylist(), strict=True):
        yield offset, tuple((o["topic"], o["key"], o["value"],
                             tuple((h["key"], h["value"]) for h in o["headers"] or ()))
                            for o in outs or ())


def out(topic, key, value, headers):
    return {"topic": topic, "key": key, "value": value, "headers": headers}


ROWS = [
    {"partition": 1, "offset": 5, "outputs": [out("a", b"k", b"v", [{"key": "h", "value": b"1"}]),
                                              out("b", None, b"w", None)]},
    {"partition": 1, "offset": 6, "outputs": None},
    {"partition": 1, "offset": 7, "outputs": []},
    {"partition": 1, "offset": 9, "outputs": [out("c", b"k2", None, [{"key": "x", "value": None},
                                                                      {"key": "y", "value": b"2"}])]},
]


def test_same_records_as_to_pylist_including_slices_and_nulls():
    batch = pa.RecordBatch.from_pylist(ROWS, schema=SCHEMA)
    for b in (batch, batch.slice(1), batch.slice(0, 2), batch.slice(3), batch.slice(1, 2)):
        assert list(arrow_records(b)) == list(reference(b))


def test_repeated_topics_and_headers_are_one_object_each():
    # Buffered for replay until their transaction commits: a str per row for a topic or a header
    # name that every row repeats was memory for nothing.
    rows = [{"partition": 0, "offset": i, "outputs": [out("invoices", str(i).encode(), b"v",
                                                          [{"key": "record_type", "value": b"invoice"}])]}
            for i in range(50)]
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    got = list(arrow_records(batch))
    assert got == list(reference(batch))
    topics = {id(outs[0][0]) for _, outs in got}
    names = {id(outs[0][3][0][0]) for _, outs in got}
    header_values = {id(outs[0][3][0][1]) for _, outs in got}
    assert len(topics) == len(names) == len(header_values) == 1
    assert len({id(outs[0][1]) for _, outs in got}) == 50  # keys are the rows' own


def test_null_list_backed_by_a_non_empty_segment_is_empty():
    values = pa.array(ROWS[0]["outputs"] + ROWS[3]["outputs"], type=OUTPUT)
    lists = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), values, mask=pa.array([False, True, False]))
    batch = pa.RecordBatch.from_arrays([pa.array([1, 1, 1], pa.int32()), pa.array([1, 2, 3], pa.int64()), lists],
                                       schema=SCHEMA)
    got = list(arrow_records(batch))
    assert got == list(reference(batch))
    assert got[1] == (2, ())


def test_records_hold_no_list_and_the_collector_stops_tracking_them():
    """Buffered for replay until their transaction commits: a list among them would be traversed by every
    collection of its generation; tuples of atoms the collector untracks the first time it meets them."""
    import gc

    batch = pa.RecordBatch.from_pylist(ROWS * 100, schema=SCHEMA)
    records = list(arrow_records(batch))
    # A collection untracks a tuple once everything it holds is untracked, so at least the innermost level
    # still tracked each time: record, outputs, output, headers, header pair are 5 levels.
    for _ in range(5):
        gc.collect()
    tracked = [r for r in records if gc.is_tracked(r) or any(gc.is_tracked(o) for o in r[1])]
    assert tracked == []


def test_read_timer_counts_only_the_wait_for_the_next_batch():
    import time

    def slow_batches():
        for i in range(3):
            time.sleep(0.05)  # Spark reading and transforming
            yield i

    timer = ReadTimer(slow_batches())
    for _ in timer:
        time.sleep(0.5)  # publishing: not read time
    assert 0.15 <= timer.seconds < 1.0  # far below the 1.5 s spent publishing


def test_result_batch_is_the_one_row_result_schema():
    batch = result_batch(7, '{"partition": 7, "note": "ü"}')
    batch.validate(full=True)
    assert batch.schema == pa.schema([("partition", pa.int32()), ("result", pa.string())])
    assert batch.to_pylist() == [{"partition": 7, "result": '{"partition": 7, "note": "ü"}'}]


def test_the_tasks_arrow_code_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas on its first Python-to-Arrow conversion (~0.6 CPU s per Python worker);
    converting a batch to records and building the result must not convert any."""
    import subprocess
    import sys

    path = tmp_path / "batch.arrow"
    batch = pa.RecordBatch.from_pylist(ROWS, schema=SCHEMA)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, SCHEMA) as writer:
        writer.write_batch(batch)
    code = f"""
import sys
import pyarrow as pa
from eos_etl.engine.tasks.arrow_codec import arrow_records, result_batch
batch = pa.ipc.open_stream(pa.OSFile({str(path)!r})).read_next_batch()
records = list(arrow_records(batch))
result_batch(1, "{{}}")
assert len(records) == {len(ROWS)}, records
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
