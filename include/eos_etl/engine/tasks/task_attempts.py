"""How the Spark task attempts of one run ended: the ones the summary cannot see.

A run's summary is built from the result each partition's *successful* attempt
returns. The attempts that lost never return one: an attempt fenced by a retry
or a speculative copy (its ``init_transactions`` bumped the epoch), one crashed
by the stall watchdog, a copy Spark killed as redundant. Only Spark knows them,
so the run tags its jobs with a job group and, afterwards, reads how every task
attempt of those jobs ended from the driver's status store (kept with the UI
off too). The read is bounded: a window has one task per input partition, and
at most :data:`MAX_TASKS_READ` attempts per stage are looked at.

A Spark Connect client (``engine.tasks.connect_route``) has no status store to read: it tags
its operations with the same name (``addTag``) and reads how the attempts of the
jobs carrying that tag ended from the server's event log (Spark's own
``EventLoggingListener``, JSON lines, see ``embedded.spark_connect``), when the
directory is given (``$EOS_ETL_SPARK_EVENT_LOG_DIR``, set for the project's own
server); only what the run appended to it is read. Without it the attempts are
reported as not visible (``visible=False``, counts None in the summary).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .connect_route import is_connect

log = logging.getLogger(__name__)

# The error class a fenced attempt raises (engine.errors); Spark keeps the
# Python traceback, whose last line names it, as the attempt's error message.
FENCED_MARKER = "ProducerFencedError"
# The error class of an attempt whose records stopped short of its window end (engine.errors).
INTERRUPTED_MARKER = "WindowEndNotReachedError"
# Spark's words for an attempt whose process died under it (an executor or a Python worker lost).
DIED_MARKERS = ("ExecutorLostFailure", "Python worker exited unexpectedly")
MAX_TASKS_READ = 10_000
_JOB_GROUP = "spark.jobGroup.id"
_JOB_DESCRIPTION = "spark.job.description"
_INTERRUPT_ON_CANCEL = "spark.job.interruptOnCancel"
#: Where a Spark Connect server writes its event log, when a client may read it.
EVENT_LOG_ENV = "EOS_ETL_SPARK_EVENT_LOG_DIR"
#: How long a client waits for its jobs' end to reach the event log (the listener writes it
#: asynchronously, and flushes at a job's end).
EVENT_LOG_WAIT_S = 5.0


def ending(status: str, error: str | None) -> str:
    """How one attempt ended, in the run's words: ``finished``; ``fenced`` (a newer attempt took its
    transactional id); ``interrupted`` (Spark interrupted or cancelled it, or its records stopped short of
    its window end); ``killed`` (its process died: a lost executor or Python worker); ``failed``."""
    error = error or ""
    if status == "SUCCESS":
        return "finished"
    if status == "KILLED" or INTERRUPTED_MARKER in error:
        return "interrupted"
    if FENCED_MARKER in error:
        return "fenced"
    if any(marker in error for marker in DIED_MARKERS):
        return "killed"
    return "failed"


@dataclass
class TaskAttempts:
    """Attempts of the run's tasks by how they ended (``fenced`` is a subset of ``failed``), and each
    task's attempts in the order they ended (:func:`ending`), keyed by the task's Spark partition until
    :meth:`name_partitions` gives them their input partitions.

    ``visible`` is False when Spark could not be asked (a Spark Connect client): the counts then say nothing."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    fenced: int = 0
    killed: int = 0
    visible: bool = True
    partitions: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def count(self, status: str, error: str | None, task: int | None = None) -> None:
        self.total += 1
        if status == "SUCCESS":
            self.succeeded += 1
        elif status == "KILLED":
            self.killed += 1
        elif status == "FAILED":
            self.failed += 1
            if error and FENCED_MARKER in error:
                self.fenced += 1
        self.partitions.setdefault(f"task {task}", []).append(ending(status, error))

    def name_partitions(self, input_partition: dict[int, int | str]) -> None:
        """Key each task's attempts by its input partitions (``input_partition``: Spark partition -> input
        partition, or a writer slot's partitions as ``"1,5,9"``, from the results); a task no attempt of which
        returned a result keeps its Spark name."""
        named = {}
        for key, endings in self.partitions.items():
            task = key.removeprefix("task ")
            inp = input_partition.get(int(task)) if task.isdigit() else None
            named[key if inp is None else str(inp)] = endings
        self.partitions = named


class AttemptTracker:
    """Tags the Spark jobs started inside ``with`` and tells how their task attempts ended.

    Job groups are per thread, so concurrent runs in one Spark application
    (threads) are told apart. The previous group of the thread is restored.
    """

    def __init__(self, spark, run_id: str):
        self._spark = spark
        self._connect = is_connect(spark)
        self._sc = None if self._connect else spark.sparkContext
        # Unique even for two runs given the same run id: cancelling this group (engine.tasks.replica_guard)
        # must reach this run's jobs only.
        self.group = f"eos-etl-run-{run_id}-{uuid.uuid4().hex[:8]}"
        self._previous: tuple[str | None, str | None, str | None] = (None, None, None)
        events = os.environ.get(EVENT_LOG_ENV)
        self._events = EventLogReader(Path(events)) if self._connect and events else None

    def __enter__(self) -> "AttemptTracker":
        if self._connect:
            if self._events is not None:
                self._events.mark()
            self._spark.addTag(self.group)
            return self
        self._previous = tuple(self._sc.getLocalProperty(k) for k in (_JOB_GROUP, _JOB_DESCRIPTION,
                                                                      _INTERRUPT_ON_CANCEL))
        # A cancelled or aborted run interrupts its tasks' threads, as a Spark Connect server does for its
        # operations: the run stops at once, and its tasks commit only positions they proved.
        self._sc.setJobGroup(self.group, f"eos-etl publish ({self.group})", interruptOnCancel=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._connect:
            self._spark.removeTag(self.group)
            return
        for key, value in zip((_JOB_GROUP, _JOB_DESCRIPTION, _INTERRUPT_ON_CANCEL), self._previous, strict=True):
            self._sc.setLocalProperty(key, value)

    def attempts(self) -> TaskAttempts:
        """Every task attempt of the group's jobs, by outcome; empty if Spark cannot tell."""
        if self._connect:
            if self._events is None:
                return TaskAttempts(visible=False)
            try:
                return self._events.attempts(self.group)
            except (OSError, ValueError) as exc:  # a statistic must never fail a finished run
                log.warning("could not read the task attempts of %s from the server's event log: %s", self.group, exc)
                return TaskAttempts(visible=False)
        out = TaskAttempts()
        try:
            store = self._sc._jsc.sc().statusStore()
            tracker = self._sc.statusTracker()
            for job_id in tracker.getJobIdsForGroup(self.group):
                job = tracker.getJobInfo(job_id)
                for stage_id in (job.stageIds if job is not None else ()):
                    stage = tracker.getStageInfo(stage_id)
                    # A stage re-run (e.g. after a lost executor) keeps its id under a new attempt number.
                    for stage_attempt in range(stage.currentAttemptId + 1 if stage is not None else 0):
                        for task in _seq(store.taskList(stage_id, stage_attempt, MAX_TASKS_READ)):
                            error = task.errorMessage()
                            out.count(str(task.status()), str(error.get()) if error.isDefined() else None,
                                      int(task.partitionId()))
        except Exception as exc:  # noqa: BLE001 - a statistic must never fail a finished run
            log.warning("could not read the task attempts of %s from Spark: %s", self.group, exc)
        return out


def _seq(scala_seq):
    """Iterate a Scala ``Seq`` reached through py4j."""
    return (scala_seq.apply(i) for i in range(scala_seq.size()))


class EventLogReader:
    """The task attempts of tagged jobs, from what a Spark application appended to its event log
    (a directory of rolling ``events_*`` files) since :meth:`mark`."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._start: dict[Path, int] = {}

    def _files(self) -> list[Path]:
        return sorted(self.directory.glob("eventlog_v2_*/events_*"), key=lambda p: (p.stat().st_mtime, p.name))

    def mark(self) -> None:
        """Remember where every file ends now: only lines written after this are read."""
        self._start = {p: p.stat().st_size for p in self._files()}

    def _lines(self):
        for path in self._files():
            with open(path, "rb") as f:
                f.seek(self._start.get(path, 0))
                yield from f

    def attempts(self, tag: str, wait_s: float = EVENT_LOG_WAIT_S) -> TaskAttempts:
        """Every attempt of the stages of the jobs tagged ``tag`` (once their ends were logged)."""
        deadline = time.monotonic() + wait_s
        while True:
            jobs, ended, stages, tasks = set(), set(), set(), []
            needle = tag.encode()
            for line in self._lines():
                if b'"SparkListenerJobStart"' in line and needle in line:
                    event = json.loads(line)
                    jobs.add(event["Job ID"])
                    stages.update(event.get("Stage IDs", ()))
                elif b'"SparkListenerJobEnd"' in line:
                    ended.add(json.loads(line)["Job ID"])
                elif b'"SparkListenerTaskEnd"' in line:
                    tasks.append(line)
            if jobs <= ended or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        out = TaskAttempts()
        for line in tasks:
            event = json.loads(line)
            if event.get("Stage ID") not in stages:
                continue
            reason = event.get("Task End Reason", {})
            kind = reason.get("Reason")
            status = "SUCCESS" if kind == "Success" else "KILLED" if kind == "TaskKilled" else "FAILED"
            info = event.get("Task Info", {})
            out.count(status, f"{kind} {reason.get('Description', '')} {reason.get('Full Stack Trace', '')}",
                      info.get("Partition ID", info.get("Index")))
        return out

