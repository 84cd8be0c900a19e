"""The partition sweep's windows in order, on a recording stand-in for the bench (the sweep itself runs
against a real broker and Spark Connect server in ``make bench-partitions``)."""

from __future__ import annotations

from types import SimpleNamespace

from eos_etl_lab.bench import partition_sweep


class RecordingBench:
    def __init__(self):
        self.opts = SimpleNamespace(sweep_partitions=[4], sweep_records=1000, sweep_small=20, repeats=1,
                                    sweep_slots=[2])
        self.connect = object()  # already started: no warm-up window
        self.calls: list[tuple] = []
        self.requests = 0
        self.target = SimpleNamespace(prepare_input=lambda topic, pc, count: self.calls.append(("input", pc, count)),
                                      request_counts=self._count, inputs={4: {}},
                                      admin=SimpleNamespace(delete_topics=lambda topics: None),
                                      wait_deleted=lambda: self.calls.append(("settled",)))

    def _count(self):
        self.requests += 3
        return {"EndTxn": self.requests}

    def run_case(self, case, *, size, settings=None, row_tags, **kwargs):
        pipeline = settings or f"pipeline-{row_tags['sweep']}"
        self.calls.append((row_tags["sweep"], size, settings))
        return {"ok": True}, pipeline

    def check_s(self, settings, size, pc, tags):
        self.calls.append(("check", settings, size))

    def drop_outputs(self, settings):
        self.calls.append(("drop", settings))

    def save(self):
        pass


def test_a_pipelines_next_window_is_measured_after_its_first_once_deletions_settled_and_the_checker_judges_both():
    bench = RecordingBench()
    partition_sweep.run(bench)
    assert bench.calls == [
        ("input", 4, 2000),  # twice the full window: a first window and the next
        ("settled",), ("first", 1000, None), ("settled",), ("full", 2000, "pipeline-first"),
        ("check", "pipeline-first", 1000), ("settled",), ("empty", 0, "pipeline-first"), ("drop", "pipeline-first"),
        ("settled",), ("small-first", 20, None), ("settled",), ("small", 20, "pipeline-small-first"),
        ("check", "pipeline-small-first", 20), ("drop", "pipeline-small-first"),
    ]
