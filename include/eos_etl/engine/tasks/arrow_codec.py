"""Arrow in and out of a publishing task, converted column by column.

In: :func:`arrow_records` turns Spark's Arrow batches of the transform's columns
(:mod:`.transform_contract`) into the engine's input records,
``(offset, [(topic, key, value, [(header, bytes), ...]), ...])``. Out: :func:`result_batch`
is the task's one row, ``partition INT, result STRING``.

Neither converts a Python value to Arrow: pyarrow imports pandas the first time one is
(a fill value, ``pa.array``), 0.6 CPU s in every Python worker, for nothing. The result batch is
built from raw buffers instead.
"""

from __future__ import annotations

import struct


def _list_lengths(lists) -> list[int]:
    """Each list's length, 0 for a null list (whose segment ``flatten()`` skips)."""
    # pyarrow deferred, here and below: its import is paid where batches are converted (the
    # Python workers), not by everything that imports the engine.
    import pyarrow.compute as pc

    lengths = pc.list_value_length(lists).to_pylist()
    return [n or 0 for n in lengths] if lists.null_count else lengths


def _shared_pylist(array) -> list:
    """``array.to_pylist()`` with one Python object per distinct value instead of one per row.

    For columns that repeat (topics, header names and values): the records of an open transaction
    stay buffered for replay (``chunk_records`` per partition), and a fresh ``str`` per output for
    its topic and header made a buffered shop record 1,605 instead of 1,229 bytes in Python.
    """
    import pyarrow.compute as pc  # deferred: pyarrow, as in _list_lengths

    encoded = pc.dictionary_encode(array, null_encoding="encode")  # a null becomes one more value, None
    values = encoded.dictionary.to_pylist()
    return [values[i] for i in encoded.indices.to_pylist()]


def result_batch(partition: int, result_json: str):
    """The task's one-row ``partition INT, result STRING`` batch, built from raw buffers (see above)."""
    import pyarrow as pa  # deferred: pyarrow, as in _list_lengths

    text = result_json.encode()
    partition_a = pa.Array.from_buffers(pa.int32(), 1, [None, pa.py_buffer(struct.pack("<i", partition))])
    result_a = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, len(text))),
                                                      pa.py_buffer(text)])
    return pa.RecordBatch.from_arrays([partition_a, result_a], names=["partition", "result"])


def arrow_records(batch):
    """Yield ``(offset, ((topic, key, value, ((header, bytes), ...)), ...))`` per row of an Arrow batch.

    Tuples all the way down, no lists: an open transaction's records stay buffered for replay (up to
    ``chunk_records`` per partition), and the cyclic garbage collector traverses every list it holds at
    each collection of its generation, where a tuple of atoms (ints, bytes, str, such tuples) it
    untracks once what it holds is untracked (the innermost level first, a level a collection).
    Buffered as lists, a purchase cost 4.0 CPU-µs in the loop against 2.0 (`LineageWriter.write` and
    the buffer alone, 400,000 purchases in transactions of 50,000; 1.9-2.0 with the collector off).

    Converts column by column (the flattened child arrays of ``outputs`` and
    of its ``headers``, split by list lengths) instead of ``to_pylist()`` on the
    nested column, which builds a dict per output and per header. Rows and
    outputs keep their order; a null ``outputs`` or ``headers`` is empty.
    """
    offsets = batch.column("offset").to_pylist()
    outputs = batch.column("outputs")
    counts = _list_lengths(outputs)
    # flatten() honours the array's slice offset and skips null lists' segments.
    topic_a, key_a, value_a, headers_a = outputs.flatten().flatten()
    topics = _shared_pylist(topic_a)
    keys = key_a.to_pylist()
    values = value_a.to_pylist()
    header_counts = _list_lengths(headers_a)
    header_names, header_values = headers_a.flatten().flatten()
    pairs = tuple(zip(_shared_pylist(header_names), _shared_pylist(header_values), strict=True))
    i = h = 0
    for offset, n in zip(offsets, counts, strict=True):
        outs = []
        for j in range(i, i + n):
            nh = header_counts[j]
            outs.append((topics[j], keys[j], values[j], pairs[h:h + nh]))  # a tuple's slice: a tuple
            h += nh
        i += n
        yield offset, tuple(outs)
