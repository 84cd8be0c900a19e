"""Run one window: Spark reads it read_committed, a transform maps records to outputs, and one
Spark task per input partition publishes them exactly once.

:func:`run_window`, in order:

1. :func:`~.preflight.preflight` (unless ``check=False``): a run that cannot work fails before
   anything is read or published.
2. An empty window: no Spark job; every partition's committed position is committed again
   (:func:`~.publisher.publish_without_spark`), so the group's offsets never expire while the
   pipeline runs. The run ends here.
3. Partitions the group had no offset for (``Window.uncommitted``), empty ones included: their
   starts are committed first, so a run that fails later still leaves every partition it planned
   with its position committed and checkpointed.
4. The query: ``transform(read_window(...))`` (:mod:`.kafka_source`), its columns checked
   (:mod:`.transform_contract`), while the executors' Python workers start alongside
   (:mod:`.worker_warmup`).
5. One publishing task per non-empty input partition (:mod:`.publish_task`), under a
   :class:`~.replica_guard.ReplicaGuard` (outputs that lose their min ISR fail the run with that
   reason, not the tasks' timeouts) and an :class:`~.task_attempts.AttemptTracker` (every
   attempt of the tasks, the losing ones included). On a Spark Connect server the tasks commit only
   while this client holds its lease (:mod:`eos_etl.engine.publishing.client_lease`).
6. Partitions with no row in Spark (a range of only aborted records or markers, an empty range)
   have their window end committed without Spark.
7. The end: once a read_committed reader sees everything the run's committed transactions wrote
   (:func:`~.visibility.wait_visible`; the empty window's renewals too), so a checker or
   ``validate`` right after never judges a half-visible commit; not within
   :data:`~.visibility.VISIBLE_TIMEOUT_S`: :class:`~eos_etl.engine.errors.CommitNotVisibleError`.

What the run did is its :class:`RunSummary`. The transform is the only domain-specific part
(:mod:`.transform_contract`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...kafka import reachability
from .. import failpoints
from ..pipeline import PipelineConfig
from ..planning.identity_keeper import bound_for_run
from ..planning.preflight import Preflight, preflight
from ..publishing import client_lease, visibility
from ..publishing.publisher import PartitionResult, publish_without_spark, renew_positions
from ..publishing.visibility import last_written, wait_visible
from ..transform_contract import check_contract
from ..window import OffsetRange, Window
from .connect_route import is_connect
from .kafka_source import read_window
from .publish_task import publish_task, result_schema
from .replica_guard import ReplicaGuard
from .task_attempts import AttemptTracker, TaskAttempts
from .task_errors import diagnosed
from .worker_warmup import PythonWorkerWarmup

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What one run did: each partition's :class:`~.publisher.PartitionResult`, its time, and every
    attempt of its publishing tasks (:meth:`to_dict`: its JSON form)."""

    run_id: str
    window: Window
    partitions: list[PartitionResult] = field(default_factory=list)
    seconds: float = 0.0
    # Of ``seconds``, waiting until a read_committed reader saw everything the run committed (step 7).
    visible_seconds: float = 0.0
    # Every Spark attempt of the publishing tasks, the losing ones included (fenced, crashed, killed).
    task_attempts: TaskAttempts = field(default_factory=TaskAttempts)

    @property
    def records_read(self) -> int:
        return sum(r.records_read for r in self.partitions)

    @property
    def records_published(self) -> int:
        return sum(r.records_published for r in self.partitions)

    @property
    def records_skipped(self) -> int:
        return sum(r.records_skipped for r in self.partitions)

    @property
    def transactions(self) -> int:
        return sum(r.transactions for r in self.partitions)

    def outputs(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for r in self.partitions:
            for topic, n in r.outputs.items():
                total[topic] = total.get(topic, 0) + n
        return total

    def read_seconds(self) -> float:
        """The longest a publishing task waited for its records (a writer slot's task: its partitions' shares
        together)."""
        per_task: dict = {}
        for r in self.partitions:
            key = ("task", r.spark_partition) if r.spark_partition is not None else ("driver", r.partition)
            per_task[key] = per_task.get(key, 0.0) + r.read_seconds
        return round(max(per_task.values(), default=0.0), 3)

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "window": self.window.to_dict(),
            "records_read": self.records_read,
            "records_published": self.records_published,
            "records_skipped": self.records_skipped,
            "outputs": self.outputs(),
            "transactions": self.transactions,
            "aborts": sum(r.aborts for r in self.partitions),
            # Tasks run side by side: the slowest one's wait for records is the run's read time.
            "read_seconds": self.read_seconds(),
            "fenced_attempts": self.task_attempts.fenced if self.task_attempts.visible else None,
            "task_attempts": self.task_attempts.to_dict(),
            "seconds": self.seconds,
            "visible_seconds": self.visible_seconds,
            "partitions": [r.to_dict() for r in sorted(self.partitions, key=lambda r: r.partition)],
        }


def run_window(
    spark,
    config: PipelineConfig,
    window: Window,
    transform: Callable,
    *,
    check: bool = True,
    preflighted: Preflight | None = None,
) -> RunSummary:
    """Publish ``transform(window)`` exactly once; return what this run did. ``preflighted``: the caller's
    own preflight of ``config`` (then none here, whatever ``check``).

    A Spark Connect client holds its lease for the run (:mod:`eos_etl.engine.publishing.client_lease`: the
    server's tasks commit only while it lives), joined from the start on, so the join overlaps the preflight
    and the query's build."""
    with client_lease.held(config, is_connect(spark) and not window.is_empty) as lease:
        return _run_window(spark, config, window, transform, check=check, preflighted=preflighted, lease=lease)


def _run_window(spark, config: PipelineConfig, window: Window, transform: Callable, *, check: bool,
                preflighted: Preflight | None, lease) -> RunSummary:
    t0 = time.monotonic()
    # Made now, asked at the end (step 7): by then connected to the partition leaders (engine.publishing.visibility).
    visible = visibility.client(config.connection)
    # Every record this run writes names the topic it was planned on; its settings and the window's identity
    # version are the recorded identity's before anything is read or fenced.
    config = bound_for_run(config.bound_to(window), window)
    if preflighted is None and check:
        preflighted = preflight(config)
    retention_minutes = preflighted.offsets_retention_minutes if preflighted is not None else None
    t_preflight = time.monotonic() - t0
    summary = RunSummary(run_id=config.run_id, window=window)
    log.info("run %s: window %s, transactional ids %s-%s-*", config.run_id, window,
             config.transactional_id_prefix, config.input_topic)
    if window.is_empty:
        summary.partitions = renew_positions(config, window, retention_minutes)
        summary.visible_seconds = wait_visible(config.connection, last_written(summary.partitions), admin=visible)
        summary.seconds = round(time.monotonic() - t0, 3)
        log.info("run %s: window is empty: nothing to publish; %d of %d committed positions renewed",
                 config.run_id, len(summary.partitions), len(window.ranges))
        return summary
    early: dict[int, PartitionResult] = {}
    started: list[PartitionResult] = []  # every start committed first (its records are waited for at the end)
    if starts := {p: OffsetRange(window.ranges[p].start, window.ranges[p].start) for p in window.uncommitted}:
        # The group had no offset for these: their starts first, the empty ones' too (their start is
        # their end), so a run that fails later still leaves every partition it planned with its
        # position committed (and checkpointed), as its checkpoint records' input_partitions claim.
        with failpoints.suspended():  # the publishing path's fault points are the tasks', not this
            started = publish_without_spark(config, starts)
            early = {r.partition: r for r in started if window.ranges[r.partition].is_empty}
    tasks = len({config.slot_of(p) for p in window.nonempty()})  # one per writer slot with records to read
    warmup = PythonWorkerWarmup(spark, tasks=tasks).start()
    t_build = time.monotonic()
    out = transform(read_window(spark, config, window))
    check_contract(out)
    t_build = time.monotonic() - t_build
    warmup.wait()
    task_config = lease.bound(config)  # on Spark Connect: naming the client's lease, once it is held
    # The tracker first: its job group (or operation tag) is the run's own, the only one the guard cancels.
    with AttemptTracker(spark, config.run_id) as attempts, \
            ReplicaGuard(spark, config.connection, config.output_topics, group=attempts.group) as guard:
        log.info("run %s: preflight %.2fs, query built in %.2fs%s; starting %d publishing tasks",
                 config.run_id, t_preflight, t_build,
                 "" if warmup.seconds is None else f" (Python workers started alongside in {warmup.seconds}s)",
                 tasks)
        try:
            rows = (
                out.select("partition", "offset", "outputs")
                .mapInArrow(publish_task(task_config.to_json(), window.to_json(),
                                         answered=reachability.has_answered(config.connection)), result_schema())
                .collect()
            )
        except Exception as exc:
            guard.raise_if_tripped(exc)  # the outputs lost min ISR: that, not the tasks' timeouts, is the error
            if (error := diagnosed(exc)) is not None:  # the tasks' own diagnosed error: one line, its exit code
                raise error from exc
            raise
    done = {row["partition"]: PartitionResult(**json.loads(row["result"])) for row in rows}
    summary.task_attempts = attempts.attempts()
    summary.task_attempts.name_partitions(_tasks_partitions(done))
    # Partitions whose range held no visible record (only aborted records or markers) had no
    # rows in Spark; their offsets still advance to the window end. Empty ranges renew their commit.
    missed = publish_without_spark(config, {p: rng for p, rng in window.ranges.items()
                                            if p not in done and p not in early})
    summary.partitions = [*done.values(), *early.values(), *missed]
    summary.visible_seconds = wait_visible(config.connection, last_written([*started, *summary.partitions]),
                                           admin=visible)
    summary.seconds = round(time.monotonic() - t0, 3)
    _log_finished(summary)
    return summary


def _log_finished(summary: RunSummary) -> None:
    a = summary.task_attempts
    log.info(
        "run %s finished in %.1fs (%.3fs of it until read_committed readers saw its commits): read=%d "
        "published=%d skipped=%d outputs=%s transactions=%d task attempts=%s",
        summary.run_id, summary.seconds, summary.visible_seconds, summary.records_read, summary.records_published,
        summary.records_skipped, summary.outputs(), summary.transactions,
        f"{a.total} (failed {a.failed}, fenced {a.fenced}, killed {a.killed})" if a.visible
        else "not visible to a Spark Connect client",
    )


def _tasks_partitions(done: dict[int, PartitionResult]) -> dict[int, str]:
    """Spark partition -> the input partitions its task published (``"1,5,9"`` for a writer slot's)."""
    tasks: dict[int, list[int]] = {}
    for p, r in sorted(done.items()):
        tasks.setdefault(r.spark_partition, []).append(p)
    return {t: ",".join(map(str, ps)) for t, ps in tasks.items()}
