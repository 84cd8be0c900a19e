"""The per-purchase breakdown's arithmetic (bench/breakdown.py): medians per stage, what each stage adds
over the one before, and the publishing tasks' own clocks (broker-free)."""

from __future__ import annotations

from eos_etl_lab.bench import breakdown


def _row(stage, job, cpu, ok=True, parts=None):
    return {"stage": stage, "job_s": job, "cpu_s": cpu, "ok": ok,
            "result": {"partitions": parts} if parts is not None else {}}


def test_each_stage_adds_its_median_over_the_previous_stage_per_purchase():
    rows = [_row("read", 10.0, 20.0), _row("read", 12.0, 22.0), _row("read", 11.0, 21.0),
            _row("transform", 15.0, 30.0), _row("transform", 99.0, 99.0, ok=False),
            _row("publish", 25.0, 40.0)]
    got = {t["stage"]: t for t in breakdown.table(rows, 1_000_000)}
    assert list(got) == ["read", "transform", "publish"]  # a stage without runs is left out, in order
    assert got["read"]["job_s"] == 11.0 and got["read"]["per_purchase_us"] == 11.0 and "adds_us" not in got["read"]
    assert got["transform"]["runs"] == 1 and got["transform"]["adds_us"] == 4.0  # the failed run is not counted
    assert got["transform"]["adds_cpu_us"] == 9.0
    assert got["publish"]["adds_us"] == 10.0 and got["publish"]["adds_cpu_us"] == 10.0


def test_the_task_clocks_split_a_task_into_waiting_decoding_publishing_and_the_proof():
    part = {"seconds": 10.0, "read_seconds": 4.0, "decode_seconds": 1.0, "end_proof_s": 0.5,
            "worker_cpu_seconds": 6.0}
    rows = [_row("publish", 20.0, 30.0, parts=[part, part]), _row("read", 5.0, 5.0, parts=[part])]
    clocks = breakdown.task_clocks(rows)
    assert clocks == {"seconds": 20.0, "read_seconds": 8.0, "decode_seconds": 2.0, "end_proof_s": 1.0,
                      "worker_cpu_seconds": 12.0, "publish_seconds": 9.0}
    assert breakdown.task_clocks([_row("read", 5.0, 5.0)]) is None
    text = breakdown.markdown(rows, 1_000_000, 4)
    assert "| publish | 1 | 20.00 |" in text and "| 8.00 | 2.00 | 9.00 | 1.00 | 20.00 | 12.00 |" in text
