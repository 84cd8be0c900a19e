"""The partition sweep's table: medians per count and sweep, ratios to the smallest count, targets."""

from __future__ import annotations

from eos_etl_lab.bench import partitions


def _row(pc: int, sweep: str, wall: float, *, ok: bool = True, purchases: int = 100) -> dict:
    return {"pc": pc, "sweep": sweep, "wall_s": wall, "job_s": wall - 0.5, "ok": ok, "window_purchases": purchases}


def test_medians_per_count_and_sweep_with_the_ratio_to_the_smallest_count():
    rows = [_row(4, "full", w) for w in (10.0, 12.0, 11.0)] + [_row(128, "full", w) for w in (30.0, 33.0, 31.0)]
    rows += [_row(4, "empty", 1.0), _row(128, "empty", 2.7), _row(128, "small", 9.0, ok=False)]
    rows += [{"case": "SC", "ok": True}]  # a row of another section
    lines = {line["partitions"]: line for line in partitions.table(rows)}
    assert lines[4]["full"] == {"runs": 3, "wall_s": 11.0, "job_s": 10.5, "purchases": 100, "ratio": 1.0}
    assert lines[128]["full"]["wall_s"] == 31.0 and lines[128]["full"]["ratio"] == 2.82
    assert lines[128]["empty"]["ratio"] == 2.7
    assert "small" not in lines[128]  # its only run failed
    assert partitions.verdicts(rows) == {128: {"full": False, "empty": False}}


def test_targets_met_within_their_ratios_and_the_table_renders():
    rows = [_row(4, s, 10.0) for s in partitions.SWEEPS] + [_row(128, "full", 15.0), _row(128, "small", 20.0),
                                                              _row(128, "empty", 20.1), _row(128, "first", 40.0)]
    rows += [_row(1024, "full", 20.0), _row(1024, "small", 30.1), _row(1024, "first", 90.0)]
    assert partitions.verdicts(rows) == {128: {"full": True, "small": True, "empty": False},
                                         1024: {"full": True, "small": False}}  # first windows have no target
    md = partitions.markdown(rows)
    assert "| 128 | 15.0 s (1.50x) | 100 | 20.0 s (2.00x) | 100 | 20.1 s (2.01x) | 40.0 s (4.00x) |" in md
    assert "| 1,024 | 20.0 s (2.00x) | 100 | 30.1 s (3.01x) | 100 | - | 90.0 s (9.00x) |" in md


def test_the_brokers_transactional_requests_per_window_are_tabled():
    rows = [{**_row(4, "full", 10.0), "broker_requests": {"InitProducerId": 4, "AddPartitionsToTxn": 12, "EndTxn": n}}
            for n in (4, 5, 9)] + [_row(4, "small", 2.0)]
    assert partitions.requests(rows) == {(4, "full"): {"InitProducerId": 4, "AddPartitionsToTxn": 12, "EndTxn": 5}}
    assert "| 4 | 4/12/5 | - | - | - |" in partitions.markdown(rows)


def test_jmx_tool_csv_lines_sum_by_request_over_versions():
    from eos_etl_lab.bench.targets import counts_of

    csv = "\n".join([
        'time,"1764331200000"',
        'kafka.network:type=RequestMetrics,name=RequestsPerSec,request=EndTxn,version=4:Count,"7"',
        'kafka.network:type=RequestMetrics,name=RequestsPerSec,request=EndTxn,version=5:Count,"3"',
        'kafka.network:type=RequestMetrics,name=RequestsPerSec,request=InitProducerId,version=5:Count,"2"',
        'kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=11:OneMinuteRate,"1.5"',
    ])
    assert counts_of(csv, {"EndTxn": 1}) == {"EndTxn": 11, "InitProducerId": 2}


def test_each_writer_slot_setting_has_its_own_table_and_verdicts():
    rows = [{**_row(pc, s, wall), "writer_slots": slots} for slots, walls in ((None, (10.0, 35.0)), (4, (10.0, 14.0)))
            for s in partitions.SWEEPS for pc, wall in zip((4, 128), walls, strict=True)]
    assert partitions.settings(rows) == [None, 4]
    assert partitions.verdicts(rows, None) == {128: {"full": False, "small": False, "empty": False}}
    assert partitions.verdicts(rows, 4) == {128: {"full": True, "small": True, "empty": True}}
    md = partitions.markdown(rows)
    assert "**With one transactional id per partition**" in md and "**With 4 writer slots**" in md
    assert "| 128 | 35.0 s (3.50x) |" in md and "| 128 | 14.0 s (1.40x) |" in md
