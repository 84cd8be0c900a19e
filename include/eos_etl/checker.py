"""An independent exactly-once checker: reads everything back and judges it.

It shares no state with the publisher. It reads the input topic and every
output topic from the beginning as a read_committed consumer (and, for the
aborted-output check, as read_uncommitted), plus the group's committed
offsets (where Kafka deleted them, the pipeline's checkpoint topic, which
commits with them), and reports per input partition:

* ``lost``: a committed input record below the committed offset with no output;
* ``duplicate``: an input record with more than one output in some topic;
* ``torn``: a record with one of a pair of outputs but not the other
  (an invoice without its shipment, or the reverse), or with both a pair
  and a dead letter;
* ``beyond_commit``: an output whose source offset is at or past the committed offset
  (output visible without its offsets);
* ``from_aborted_input``: an output whose source offset is not a committed input record;
* ``offset_mismatch``: the committed offset differs from the expected window end;
* ``order``: per output partition, outputs of one input partition out of input order.

Outputs are tied to inputs by the lineage headers (source_topic,
source_partition, source_offset). Only outputs whose ``source_topic`` is the
checked input topic are considered.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .engine.checkpoint_log import read_entries
from .engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from .kafka.admin import ClusterAdmin
from .kafka.connection import KafkaConnection
from .kafka.reader import ConsumedRecord, read_ranges

log = logging.getLogger(__name__)

#: How long the checker reads again while the committed offsets keep moving under it (a killed Spark Connect
#: client's orphaned tasks end on the server within 45 s, docs/spark-connect.md).
STABLE_WITHIN_S = 60.0


def read_topic(
    connection: KafkaConnection, topic: str, *, isolation: str = "read_committed", timeout_s: float = 60.0,
    start: dict[int, int] | None = None,
) -> list[ConsumedRecord]:
    """Every record of ``topic`` visible at the given isolation level, in partition/offset order
    (from ``start``'s offset where it names the partition)."""
    admin = ClusterAdmin(connection)
    offsets = admin.offsets(topic, admin.partitions(topic))
    start = start or {}
    ranges = {p: (max(o.earliest, start.get(p, 0)),
                  o.last_stable if isolation == "read_committed" else o.high_watermark)
              for p, o in offsets.items()}
    return read_ranges(connection, topic, ranges, isolation=isolation, timeout_s=timeout_s)


@dataclass
class PartitionResult:
    partition: int
    committed_offset: int | None
    committed_inputs: int = 0
    covered_inputs: int = 0
    violations: Counter = field(default_factory=Counter)
    examples: dict[str, list] = field(default_factory=dict)

    def add(self, kind: str, example) -> None:
        self.violations[kind] += 1
        ex = self.examples.setdefault(kind, [])
        if len(ex) < 5:
            ex.append(example)


@dataclass
class CheckResult:
    input_topic: str
    group: str
    partitions: dict[int, PartitionResult]
    outputs: dict[str, int]
    aborted_outputs_hidden: dict[str, int]

    @property
    def violations(self) -> Counter:
        total: Counter = Counter()
        for p in self.partitions.values():
            total.update(p.violations)
        return total

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {
            "input_topic": self.input_topic,
            "group": self.group,
            "ok": self.ok,
            "violations": dict(self.violations),
            "outputs": self.outputs,
            "aborted_outputs_hidden": self.aborted_outputs_hidden,
            "partitions": {
                p: {"committed_offset": r.committed_offset, "committed_inputs": r.committed_inputs,
                    "covered_inputs": r.covered_inputs, "violations": dict(r.violations), "examples": r.examples}
                for p, r in sorted(self.partitions.items())
            },
        }


def check(
    connection: KafkaConnection,
    *,
    input_topic: str,
    group: str,
    paired_topics: tuple[str, ...],
    single_topics: tuple[str, ...],
    expected_ends: dict[int, int] | None = None,
    check_order: bool = True,
    checkpoint_topic: str | None = None,
    outputs_from: dict[str, dict[int, int]] | None = None,
) -> CheckResult:
    """Judge the outputs of ``input_topic`` for ``group``.

    Each committed input record must have exactly one output in every topic of
    ``paired_topics`` (e.g. invoices and shipments) XOR exactly one in one of
    ``single_topics`` (e.g. the dead-letter topic).

    ``outputs_from`` (topic -> partition -> offset): only outputs at or after those offsets
    count. After the input topic was re-created, its new records reuse the old one's offsets
    and the lineage headers cannot tell the two apart: judge the outputs written since.
    """
    admin = ClusterAdmin(connection)
    parts = admin.partitions(input_topic)
    committed = _committed(connection, admin, input_topic, group, parts, checkpoint_topic)
    deadline = time.monotonic() + STABLE_WITHIN_S
    while True:
        result = _judge(connection, admin, input_topic, group, parts, committed, paired_topics, single_topics,
                        expected_ends, check_order, outputs_from)
        # Offsets and outputs are read one after the other, not as one snapshot: a commit between the two
        # reads (an orphaned task still publishing a position it proved) would show its outputs beyond the
        # offsets read before it. Equal offsets after the outputs prove no commit came between.
        again = _committed(connection, admin, input_topic, group, parts, checkpoint_topic)
        if again == committed or time.monotonic() > deadline:
            return result
        log.info("checker: %s's committed offsets moved while it read the outputs (%s -> %s): reading again",
                 input_topic, committed, again)
        committed = again


def _judge(connection: KafkaConnection, admin: ClusterAdmin, input_topic: str, group: str, parts: list[int],
           committed: dict[int, int | None], paired_topics: tuple[str, ...], single_topics: tuple[str, ...],
           expected_ends: dict[int, int] | None, check_order: bool,
           outputs_from: dict[str, dict[int, int]] | None) -> CheckResult:
    """One judgement of the outputs against ``committed``."""
    # Records below a partition's log start were deleted (retention, deleteRecords): whether they
    # were aborted can no longer be told, so their outputs are judged only against the commit.
    log_start = {p: o.earliest for p, o in admin.offsets(input_topic, parts).items()}
    input_offsets: dict[int, set[int]] = defaultdict(set)
    for r in read_topic(connection, input_topic):
        input_offsets[r.partition].add(r.offset)
    reports = {p: PartitionResult(p, committed.get(p)) for p in parts}
    scan = _OutputScan(input_topic, committed, input_offsets, reports, check_order, log_start)
    for topic in (*paired_topics, *single_topics):
        scan.read(connection, topic, (outputs_from or {}).get(topic))
    for p, rep in reports.items():
        c = committed.get(p)
        if expected_ends is not None and p in expected_ends and c != expected_ends[p]:
            rep.add("offset_mismatch", {"committed": c, "expected": expected_ends[p]})
        for off in sorted(input_offsets[p]):
            if c is not None and off < c:
                _judge_input(rep, off, scan.seen.get((p, off), Counter()), paired_topics, single_topics)
    return CheckResult(input_topic, group, reports, scan.outputs, scan.hidden)


def _committed(connection: KafkaConnection, admin: ClusterAdmin, input_topic: str, group: str,
               parts: list[int], checkpoint_topic: str | None) -> dict[int, int | None]:
    """The group's committed offsets; where one is gone (retention), the checkpoint record's."""
    committed = admin.committed_offsets(group, input_topic, parts)
    if checkpoint_topic is not None and None in committed.values():
        entries = read_entries(connection, checkpoint_topic, group, input_topic)
        committed = {p: c if c is not None or p not in entries else entries[p].next_offset
                     for p, c in committed.items()}
    return committed


class _OutputScan:
    """What the output topics hold per input record, and the faults visible record by record."""

    def __init__(self, input_topic: str, committed: dict[int, int | None], input_offsets: dict[int, set[int]],
                 reports: dict[int, PartitionResult], check_order: bool, log_start: dict[int, int]):
        self.input_topic = input_topic
        self.log_start = log_start
        self.committed = committed
        self.input_offsets = input_offsets
        self.reports = reports
        self.check_order = check_order
        self.seen: dict[tuple[int, int], Counter] = defaultdict(Counter)  # (partition, offset) -> topic -> n
        self.outputs: dict[str, int] = {}
        self.hidden: dict[str, int] = {}
        self._order_last: dict[tuple[str, int, int], int] = {}

    def read(self, connection: KafkaConnection, topic: str, start: dict[int, int] | None = None) -> None:
        records = read_topic(connection, topic, start=start)
        self.outputs[topic] = len(records)
        uncommitted = read_topic(connection, topic, isolation="read_uncommitted", start=start)
        self.hidden[topic] = len(uncommitted) - len(records)
        for r in records:
            if r.headers.get(H_SOURCE_TOPIC) == self.input_topic.encode():
                self._record(topic, r)

    def _record(self, topic: str, r) -> None:
        sp = int(r.headers[H_SOURCE_PARTITION])
        so = int(r.headers[H_SOURCE_OFFSET])
        self.seen[(sp, so)][topic] += 1
        c = self.committed.get(sp)
        rep = self.reports.setdefault(sp, PartitionResult(sp, c))
        if c is None or so >= c:
            rep.add("beyond_commit", {"topic": topic, "source_offset": so, "committed": c})
        if so not in self.input_offsets[sp] and so >= self.log_start.get(sp, 0):
            rep.add("from_aborted_input", {"topic": topic, "source_offset": so})
        if self.check_order:
            k = (topic, r.partition, sp)
            if so < self._order_last.get(k, -1):
                rep.add("order", {"topic": topic, "partition": r.partition, "source_offset": so})
            self._order_last[k] = so


def _judge_input(rep: PartitionResult, off: int, counts: Counter, paired_topics: tuple[str, ...],
                 single_topics: tuple[str, ...]) -> None:
    """One committed input record: exactly one output in every paired topic XOR in one single topic."""
    rep.committed_inputs += 1
    if not counts:
        rep.add("lost", {"source_offset": off})
        return
    rep.covered_inputs += 1
    if any(n > 1 for n in counts.values()):
        rep.add("duplicate", {"source_offset": off, "counts": dict(counts)})
    has_pair = [counts[t] > 0 for t in paired_topics]
    has_single = sum(counts[t] > 0 for t in single_topics)
    if any(has_pair) and (not all(has_pair) or has_single):
        rep.add("torn", {"source_offset": off, "counts": dict(counts)})
    elif not any(has_pair) and has_single != 1:
        rep.add("torn", {"source_offset": off, "counts": dict(counts)})


def check_shop(settings, expected_ends: dict[int, int] | None = None,
               outputs_from: dict[str, dict[int, int]] | None = None) -> CheckResult:
    t = settings.topics
    return check(settings.connection, input_topic=t.purchases, group=settings.group,
                 paired_topics=(t.invoices, t.shipments), single_topics=(t.dead_letters,),
                 expected_ends=expected_ends, checkpoint_topic=settings.pipeline().checkpoint_topic,
                 outputs_from=outputs_from)
