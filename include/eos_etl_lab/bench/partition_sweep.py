"""The partition sweep's windows (``--only partitions``): what :mod:`.partitions` tables.

Per partition count, an input topic of twice the full window's purchases (seed 42), and per repetition
and writer-slot setting, each window a ``run_shop_window`` process of its own on one Spark Connect server:

* ``first``  a fresh pipeline's first window of ``sweep_records`` purchases: it also writes the first
  records of every output and checkpoint partition, which on a fresh partition faults in its log segment's
  index pages (the broker's ``TimeIndex.maybeAppend`` was most of its CPU in a 1,024-partition first window,
  in JFR): a cost a pipeline pays once, so it is shown apart;
* ``full``   that pipeline's next window, the rest of the topic (about as many purchases again): what a
  running pipeline's window costs;
* ``empty``  that pipeline once more with nothing planned (a cap of 0 per partition): it renews every
  partition's position;
* ``small``  a fresh pipeline's second window of about ``sweep_small`` purchases (``sweep_small //
  partitions`` per partition), after a first one of the same size that is not tabled (``small-first``).

The checker judges each pipeline after its last publishing window (every input it committed, both
windows').
"""

from __future__ import annotations

from typing import Any, Protocol


class Bench(Protocol):
    """What the sweep needs of :class:`~.run.Bench` (which calls it)."""

    opts: Any
    target: Any
    connect: Any

    def start_spark_connect(self, size: int | None = None, expected_purchases: int | None = None,
                            pc: int | None = None) -> None: ...

    def run_case(self, case: str, **kwargs: Any) -> tuple[dict, Any]: ...

    def check_s(self, settings: Any, size: int, pc: int, **kwargs: Any) -> dict: ...

    def drop_outputs(self, settings: Any) -> None: ...

    def save(self) -> None: ...


#: The sweep's broker deletes a deleted topic's files a second after the deletion (Kafka's default: a
#: minute), and every measured window waits for the deletions before it (``KafkaTarget.wait_deleted``):
#: deleting a 1,024-partition pipeline's outputs took the broker CPU seconds in the next windows (in JFR,
#: ``LogManager.deleteLogs``), beside them on the same cores.
BROKER = {"file.delete.delay.ms": "1000"}

#: The brokers' request counters a partition sweep row carries (``KafkaTarget.request_counts``).
TRANSACTION_REQUESTS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")


def run(bench: Bench) -> None:
    """Every count of ``--sweep-partitions``: its input, then per repetition and writer-slot setting the
    windows above; rows tagged ``sweep`` and ``writer_slots``."""
    o = bench.opts
    for pc in o.sweep_partitions:
        bench.target.prepare_input(f"bench-sweep-p{pc}", pc, 2 * o.sweep_records)
        if bench.connect is None:  # its cold first window on the first count's input, not measured: a full
            # one, so the first measured full window does not pay the publish path's JIT warm-up (a small
            # one left the 4-partition full window 13.8 s against the next setting's 9.1 s)
            bench.start_spark_connect(size=o.sweep_records, pc=pc)
        for rep in range(1, o.repeats + 1):
            for slots in o.sweep_slots:
                _sweep(bench, pc, rep, slots)
        bench.target.admin.delete_topics([f"bench-sweep-p{pc}"])
        bench.target.inputs.pop(pc, None)


def _sweep(bench: Bench, pc: int, rep: int, slots: int | None) -> None:
    o = bench.opts
    extra = {"writer_slots": slots}

    def window(sweep: str, size: int, settings=None, keep_topics: bool = True):
        bench.target.wait_deleted()
        return _counting_requests(bench, "SC", size=size, pc=pc, rep=rep, label=f"SC sweep {sweep}",
                                  keep_topics=keep_topics, row_tags={"sweep": sweep, **extra}, settings=settings,
                                  extra=extra)[1]

    # The next window takes the rest of the topic, uncapped: about as many purchases again (a cap per
    # partition would leave out what the keys put beyond it in the fuller partitions: 151,080 of 200,000 at
    # 1,024 partitions).
    settings = window("full", 2 * o.sweep_records, window("first", o.sweep_records))
    if rep == 1:
        bench.check_s(settings, o.sweep_records, pc, tags={"case": "SC", "sweep": "full", **extra})
    window("empty", 0, settings)
    bench.drop_outputs(settings)
    settings = window("small", o.sweep_small, window("small-first", o.sweep_small), keep_topics=rep == 1)
    if rep == 1:
        bench.check_s(settings, o.sweep_small, pc, tags={"case": "SC", "sweep": "small", **extra})
        bench.drop_outputs(settings)


def _counting_requests(bench: Bench, case: str, **kwargs) -> tuple[dict, object]:
    """``bench.run_case``, with the transactional requests the brokers served meanwhile in the row
    (``broker_requests``; planning and verifying send none of them)."""
    before = bench.target.request_counts()
    row, settings = bench.run_case(case, **kwargs)
    after = bench.target.request_counts()
    row["broker_requests"] = {k: after.get(k, 0) - before.get(k, 0) for k in TRANSACTION_REQUESTS}
    bench.save()
    return row, settings
