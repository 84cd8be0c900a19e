"""Where a purchase's time goes on the default route (a client of a Spark Connect server).

A ladder of jobs over the same window on the same server, each doing one stage more than the
one before, run side by side in each repetition:

* ``read``      Spark's Kafka source (read_committed) and ``count()``;
* ``transform`` + the shop's JSON parse and output rendering, evaluated with the ``noop`` sink;
* ``arrow``     + the columns converted to Arrow and streamed to a Python worker that only counts;
* ``decode``    + the worker turning the batches into the engine's records;
* ``publish``   the exactly-once job itself (``SC``): + producing, committing, the end proof.

A stage's cost per purchase is its median job time minus the previous stage's, over the window's
purchases; the same for CPU (the client's and the server's process trees). The ``publish`` rows
also carry each task's own clocks (:class:`~eos_etl.engine.publishing.publisher.PartitionResult`): waiting for
Spark's batches, decoding them, everything else, and the Python worker's CPU.
"""

from __future__ import annotations

import json
import statistics
import time

STAGES = ("read", "transform", "arrow", "decode", "publish")


def _count_rows(batches):
    """``arrow``: the batches reach Python and are counted, nothing more."""
    from eos_etl.engine.tasks.arrow_codec import result_batch  # deferred: pyarrow, paid in the Python worker

    n = sum(b.num_rows for b in batches)
    yield result_batch(-1, json.dumps({"rows": n}))


def _decode_rows(batches):
    """``decode``: the batches turned into the engine's records, as a publishing task does, then dropped."""
    from eos_etl.engine.tasks.arrow_codec import arrow_records, result_batch  # deferred: pyarrow, as in _count_rows

    n = sum(1 for b in batches for _ in arrow_records(b))
    yield result_batch(-1, json.dumps({"rows": n}))


def run_stage(spark, settings, window, stage: str) -> tuple[float, int | None]:
    """Run one stage below ``publish`` over ``window``: (job seconds, rows the stage saw; None for the
    ``noop`` sink, which counts nothing back)."""
    # Deferred, both: pyspark, loaded only by the process that runs a stage (bench.cases).
    from eos_etl.engine.tasks.kafka_source import read_window
    from eos_etl.engine.tasks.publish_task import result_schema

    source = read_window(spark, settings.pipeline(), window)
    t0 = time.monotonic()
    if stage == "read":
        rows = source.count()
    else:
        out = settings.transform()(source).select("partition", "offset", "outputs")
        if stage == "transform":
            out.write.format("noop").mode("overwrite").save()
            rows = None
        else:
            fn = {"arrow": _count_rows, "decode": _decode_rows}[stage]
            rows = sum(json.loads(r["result"])["rows"] for r in out.mapInArrow(fn, result_schema()).collect())
    return time.monotonic() - t0, rows


def table(rows: list[dict], purchases: int) -> list[dict]:
    """Per stage: median job and CPU seconds, and what the stage adds per purchase (µs) over the one before."""
    out, before = [], None
    for stage in STAGES:
        mine = [r for r in rows if r.get("stage") == stage and r["ok"]]
        if not mine:
            continue
        job = statistics.median(r["job_s"] for r in mine)
        cpu = statistics.median(r["cpu_s"] for r in mine)
        row = {"stage": stage, "runs": len(mine), "job_s": round(job, 2), "cpu_s": round(cpu, 2),
               "per_purchase_us": round(1e6 * job / purchases, 2),
               "cpu_per_purchase_us": round(1e6 * cpu / purchases, 2)}
        if before is not None:
            row["adds_us"] = round(1e6 * (job - before["job_s"]) / purchases, 2)
            row["adds_cpu_us"] = round(1e6 * (cpu - before["cpu_s"]) / purchases, 2)
        out.append(row)
        before = {"job_s": job, "cpu_s": cpu}
    return out


def task_clocks(rows: list[dict]) -> dict | None:
    """The ``publish`` runs' task clocks, summed over tasks, median over runs (seconds)."""
    runs = []
    for r in rows:
        parts = (r.get("result") or {}).get("partitions") if r.get("stage") == "publish" and r["ok"] else None
        if not parts:
            continue
        total = {k: sum(p[k] for p in parts) for k in ("seconds", "read_seconds", "decode_seconds",
                                                         "end_proof_s", "worker_cpu_seconds")}
        total["publish_seconds"] = (total["seconds"] - total["read_seconds"] - total["decode_seconds"]
                                    - total["end_proof_s"])
        runs.append(total)
    if not runs:
        return None
    return {k: round(statistics.median(t[k] for t in runs), 2) for k in runs[0]}


def markdown(rows: list[dict], purchases: int, partitions: int) -> str:
    lines = [f"Window: {purchases:,} purchases, {partitions} partitions, on one Spark Connect server.", "",
             "| stage | runs | job s (median) | CPU s (median) | µs per purchase | stage adds µs | stage adds CPU µs |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for t in table(rows, purchases):
        lines.append(f"| {t['stage']} | {t['runs']} | {t['job_s']:.2f} | {t['cpu_s']:.2f} | "
                     f"{t['per_purchase_us']:.2f} | {t.get('adds_us', t['per_purchase_us']):.2f} | "
                     f"{t.get('adds_cpu_us', t['cpu_per_purchase_us']):.2f} |")
    clocks = task_clocks(rows)
    if clocks:
        lines += ["", "The publishing tasks' own clocks (summed over tasks, median over runs):", "",
                  "| waiting for Spark's batches s | decoding s | producing and committing s | end proof s "
                  "| task s | Python worker CPU s |", "|---:|---:|---:|---:|---:|---:|",
                  f"| {clocks['read_seconds']:.2f} | {clocks['decode_seconds']:.2f} | {clocks['publish_seconds']:.2f} "
                  f"| {clocks['end_proof_s']:.2f} | {clocks['seconds']:.2f} | {clocks['worker_cpu_seconds']:.2f} |"]
    return "\n".join(lines)
