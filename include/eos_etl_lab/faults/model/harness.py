"""One history's harness: its fresh topics, the model of the pipeline's state, and the judge.

:class:`Harness` is what every operation of the model soak works with: it starts runs and CLI
commands of the pipeline on the history's topics (a run's route, and on the Connect route where
its server's log stood, are the harness's own), waits for them, and judges them: the exit
contract of each run (:meth:`Harness.judge_run`, :meth:`Harness.exit_2`) against the model of what
the operations did (an input topic replaced or truncated, partitions added, the positions' memory
lost, offsets written by hand), and safety after each step by the independent checker
(:meth:`Harness.check`). A violation is recorded in the history's :class:`~.outcome.Outcome`, with the
step that showed it.
"""

from __future__ import annotations

import logging
import re
import shlex
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine import checkpoint_topic
from eos_etl.engine.checkpoint_log import read_entries, read_identity
from eos_etl.engine.identity import Identity
from eos_etl.engine.lineage import H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from eos_etl.kafka.errors import UnstableOffsetsError
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.settings import ShopSettings

from ..clear_failure import error_lines, run_violations
from ..job_process import JobProcess, run_window_args
from ..lab import Lab
from .outcome import Outcome, Violation
from .registry import Op

log = logging.getLogger(__name__)

#: Every run of the soak: small transactions (a fault lands between and inside them) and a short
#: transaction timeout, so a transaction a killed run left open is aborted by the broker in seconds.
RUN_EXTRA = ("--chunk-records", "100", "--chunk-seconds", "4", "--transaction-timeout-ms", "15000")
#: The bound of one run (a run still going then is killed and counted as hung).
RUN_BOUND_S = 240.0
#: The private broker deletes a group's offset a minute after its last commit: an offset written by hand
#: that no commit of the pipeline took over within this long may be gone (the partition's position is
#: then its checkpoint record's again). A little under the minute: the broker checks every 2 s.
HAND_OFFSET_EXPIRY_S = 55.0


def parse_recovery_command(error_line: str) -> list[str] | None:
    """The ``python -m eos_etl ...`` command an exit-2 line names (in backticks), without its
    trailing parenthesis, or else its ``kafka-topics --alter --topic T --partitions N`` (as
    ``["kafka-topics", T, N]``); None when it names none."""
    for quoted in re.findall(r"`([^`]+)`", error_line):
        if "eos_etl" in quoted or "eos-etl" in quoted:
            text = re.sub(r"\s*\(.*$", "", quoted).strip()
            args = shlex.split(text)
            if args[:3] == ["python", "-m", "eos_etl"]:
                return args[3:]
            if args[:1] == ["eos-etl"]:
                return args[1:]
    if m := re.search(r"kafka-topics --alter --topic (\S+) --partitions (\d+)", error_line):
        return ["kafka-topics", m.group(1), m.group(2)]
    return None


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``cond`` every half second until it holds; TimeoutError naming ``what`` past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f}s for {what}")
        time.sleep(0.5)


def retry(action: Callable[[], None], timeout_s: float) -> None:
    """``action()`` until it succeeds (a topic's deletion still under way) or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            action()
            return
        except Exception:  # noqa: BLE001 - the deletion is still under way
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


class Harness:
    """One history's fresh topics of ``lab``, the model of the pipeline's state, and the judge."""

    def __init__(self, lab: Lab, seed: int, partitions: int, ops: list[Op]):
        self.lab, self.seed, self.ops = lab, seed, ops
        self.out = Outcome(seed, partitions, list(ops))
        self.shop = lab.make_shop(partitions, name=f"model-{seed}")
        self.tmp = tempfile.mkdtemp(prefix=f"eos-model-{seed}-")
        self.step = 0
        self.excused: set[int] = set()  # partitions an exit 2 named (or a replaced input's, until its next run)
        self.replaced = False  # the input was re-created after commits: the next run must stop with exit 2
        # Partitions whose records past the committed position were deleted: the next run must stop with exit 2.
        self.truncated: set[int] = set()
        # Input partitions were added: a run may stop with exit 2 until the checkpoint topic has as many.
        self.grown = False
        self.outputs_from: dict[str, dict[int, int]] = {}
        self.last_window: str | None = None
        self.recovery: list[str] | None = None  # the command the last exit 2 named
        # The checkpoint topic was deleted (and made again empty): once the group's offsets are gone too,
        # a run must stop with exit 2 (the lineage's restore, or "nothing proves a first run") until the
        # command it names ran.
        self.memory_lost = False
        self.second: ShopSettings | None = None  # a second pipeline on this one's output topics
        # The last hand reset of the group's offsets (op_hand_offset_reset): partition -> (the offset written,
        # its checkpoint record's position then, None: no record) for every partition whose record said
        # otherwise, until a commit of the pipeline writes its record again (:meth:`follow_hand_reset`).
        self.hand: dict[int, tuple[int, int | None]] = {}
        self.hand_at = 0.0  # when (time.monotonic()) the offsets were written
        self.hand_dropped = False  # a group offset of it was seen gone (expired, the group deleted) since
        # A run on the Connect route: its tasks log to the server's log, read from where it stood at the start.
        self.server_logs: dict[JobProcess, tuple[SparkConnectServer, int]] = {}

    def note(self, text: str) -> None:
        """What a step did that its verdict does not say (kept in the outcome, and logged)."""
        self.out.notes.append(f"step {self.step}: {text}")
        log.info("seed %s step %d: %s", self.seed, self.step, text)

    def violate(self, kind: str, detail: str = "") -> None:
        v = Violation(self.step, kind, detail[:400])
        log.error("seed %s %s", self.seed, v)
        self.out.violations.append(v)

    # -- runs and commands -----------------------------------------------------------------------
    def cli(self, command: list[str], *, failpoints: str = "") -> JobProcess:
        """A CLI command of the pipeline (its connection and topic options added), started."""
        base = run_window_args(self.shop)
        options = [a for a in base[4:] if a != "--compact"]
        given = {a for a in command if a.startswith("--")}
        keep: list[str] = []
        i = 0
        while i < len(options):  # the pipeline's options the command does not give itself
            name = options[i]
            has_value = i + 1 < len(options) and not options[i + 1].startswith("--")
            if name not in given:
                keep += options[i:i + 1 + has_value]
            i += 1 + has_value
        return JobProcess([sys.executable, "-m", "eos_etl", *command, *keep], failpoints=failpoints).start()

    def run_job(self, extra: list[str] = (), *, failpoints: str = "", route: str = "local",
                env: dict | None = None) -> JobProcess:
        """A run on ``route`` (``env`` on top of the route's); a Connect run's tasks log to the server's log,
        read from where it stood now."""
        server = self.lab.connect if route == "connect" else None
        if route == "connect" and server is None:
            raise ValueError("a run on the Connect route needs a lab with a Spark Connect server")
        since = server.log_file.stat().st_size if server is not None and server.log_file.is_file() else 0
        job = self.lab.job(self.shop, [*RUN_EXTRA, *extra], failpoints=failpoints,
                           env={**(server.client_env() if server is not None else {}), **(env or {})} or None)
        if server is not None:
            self.server_logs[job] = (server, since)
        return job.start()

    def output_of(self, job: JobProcess) -> str:
        """The run's own log and, on the Connect route, what its server logged since it started."""
        server, since = self.server_logs.get(job, (None, 0))
        return job.stderr + (server.log_since(since) if server is not None else "")

    def seen(self, job: JobProcess, needle: str) -> bool:
        """``needle`` in the run's own log or, on the Connect route, in what its server logged since."""
        return bool(job.count(needle)) or needle in self.output_of(job)

    def wait_seen(self, job: JobProcess, needle: str, timeout_s: float) -> bool:
        """Wait until :meth:`seen`; False once the run ended without it or on timeout."""
        if job not in self.server_logs:
            return job.wait_for(needle, timeout_s)
        deadline = time.monotonic() + timeout_s
        while not self.seen(job, needle):
            if not job.alive or time.monotonic() > deadline:
                return self.seen(job, needle)
            time.sleep(0.2)
        return True

    def once(self) -> str:
        return f"once={self.tmp}/fp-{uuid.uuid4().hex}"

    def finish(self, job: JobProcess, bound_s: float = RUN_BOUND_S) -> int | None:
        code = job.wait(bound_s)
        if code is None:
            job.kill()
        return code

    # -- topics ----------------------------------------------------------------------------------
    def add_partitions(self, topic: str, n: int) -> None:
        """Grow ``topic`` to ``n`` partitions, and wait until the broker lists them all."""
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        client.create_partitions([NewPartitions(topic, n)])[topic].result(30)
        wait_until(lambda: len(self.lab.admin.partitions(topic)) == n, 30, f"{topic} to have {n} partitions")

    def recreate_topic(self, topic: str, partitions: int, *, readable: bool = False) -> None:
        """Delete ``topic`` and make it again, empty, as the shop's specs make it with ``partitions``;
        ``readable``: until its partitions' offsets can be read too."""
        self.lab.admin.delete_topics([topic])
        client = AdminClient(self.shop.connection.client_config())
        wait_until(lambda: topic not in client.list_topics(timeout=10).topics, 60, f"{topic} to be deleted")
        spec = {s.name: s for s in self.shop.specs(partitions)}[topic]

        def create() -> None:
            ensure_topics(self.lab.admin, [spec], allow_existing=True)
            if readable:
                self.lab.admin.offsets(topic, list(range(partitions)))

        retry(create, 60)

    def committed(self) -> dict[int, int | None]:
        """The group's committed offsets (None: none, or expired)."""
        admin = self.lab.admin
        topic = self.shop.topics.purchases
        return admin.committed_offsets(self.shop.group, topic, admin.partitions(topic))

    def records(self) -> dict:
        """The pipeline's checkpoint records by input partition (``checkpoint_log.CheckpointEntry``)."""
        return read_entries(self.shop.connection, checkpoint_topic.topic_for(self.shop.group), self.shop.group,
                            self.shop.topics.purchases)

    def positions(self) -> dict[int, int | None]:
        """Each partition's position as the pipeline knows it: the group's offset, else its checkpoint record's."""
        entries = self.records()
        return {p: c if c is not None else (entries[p].next_offset if p in entries else None)
                for p, c in self.committed().items()}

    def identity(self) -> Identity | None:
        """The pipeline's identity record (docs/pipeline-identity.md), None while none is recorded."""
        return read_identity(self.shop.connection, checkpoint_topic.topic_for(self.shop.group), self.shop.group,
                             self.shop.topics.purchases)

    def output_ends(self) -> dict[str, dict[int, int]]:
        """Each output partition's high watermark: outputs from there on are written after now."""
        admin = self.lab.admin
        return {t: {p: o.high_watermark for p, o in admin.offsets(t, admin.partitions(t)).items()}
                for t in self.shop.topics.outputs}

    def published_by(self, run_id: str) -> int:
        """Committed output records of this pipeline's input whose transaction was ``run_id``'s (lineage)."""
        mine, source = run_id.encode(), self.shop.topics.purchases.encode()
        return sum(r.headers.get(H_RUN_ID) == mine and r.headers.get(H_SOURCE_TOPIC) == source
                   for t in self.shop.topics.outputs for r in read_topic(self.shop.connection, t))

    def delete_input_below(self, upto: dict[int, int]) -> None:
        """Kafka's deleteRecords on the input below ``upto`` (partition -> offset), as retention deletes them."""
        admin = self.lab.admin
        topic = self.shop.topics.purchases
        offsets = admin.offsets(topic, sorted(upto))
        below = [TopicPartition(topic, p, o) for p, o in upto.items() if o > offsets[p].earliest]
        if below:
            client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
            for fut in client.delete_records(below).values():
                fut.result(30)

    # -- offsets written by hand -----------------------------------------------------------------
    def follow_hand_reset(self) -> None:
        """What became of the offsets the last hand reset wrote where the checkpoint records say otherwise
        (:attr:`hand`). A group offset is the position only while it exists: gone (expired a minute after
        it was written, or the group deleted) before a commit of the pipeline wrote the partition's record,
        the record's position is the position again, so

        * one below the log's start (the operator skipped records forwards, and the model deleted them:
          :meth:`~.operations.Operations.op_hand_offset_reset`) is one the next run must stop at (exit 2,
          as for records deleted before being processed);
        * one past the written offset (a reset backwards) leaves the range the operator asked for again
          unread: it is deleted from the input, as the reset deleted what lay below the offset, so the
          checker judges the rest.

        A commit that took the partition over without publishing any of that range again is the broker's
        forgetting only where the offset may have been gone before that run planned (seen gone, or older
        than the broker's retention): the range is deleted then. Otherwise a run skipped records an
        operator asked for again: ``hand_reset_not_followed``."""
        if not self.hand:
            return
        committed, entries = self.committed(), self.records()
        taken: dict[int, tuple[int, int | None, int]] = {}
        for p, (written, was) in list(self.hand.items()):
            group, record = committed.get(p), entries.get(p)
            if group is None:
                self.hand_dropped = True
                start = self.lab.admin.offsets(self.shop.topics.purchases, [p])[p].earliest
                if record is not None and record.next_offset < start:
                    self.truncated.add(p)
                elif record is not None and record.next_offset > written:
                    self.delete_input_below({p: record.next_offset})  # the range asked for again: unread now
                    self.note(f"{self.shop.topics.purchases}[{p}]'s offset {written}, written by hand, is gone "
                              f"before a commit took it over: the position is its checkpoint's {record.next_offset}")
                    del self.hand[p]
            elif record is not None and record.next_offset == group:
                taken[p] = (written, was, group)
                del self.hand[p]
        unread = {p: (written, was if was is not None else group) for p, (written, was, group) in taken.items()
                  if (was if was is not None else group) > written}
        if not unread:
            return
        topic = self.shop.topics.purchases
        inputs = {(r.partition, r.offset) for r in read_topic(self.shop.connection, topic,
                                                               start={p: lo for p, (lo, _hi) in unread.items()})
                  if r.partition in unread and r.offset < unread[r.partition][1]}
        again = {(int(r.headers[H_SOURCE_PARTITION]), int(r.headers[H_SOURCE_OFFSET]))
                 for t in self.shop.topics.outputs
                 for r in read_topic(self.shop.connection, t, start=self.outputs_from.get(t))
                 if r.headers.get(H_SOURCE_TOPIC) == topic.encode()}
        forgotten = time.monotonic() - self.hand_at >= HAND_OFFSET_EXPIRY_S or self.hand_dropped
        for p, (lo, hi) in unread.items():
            wanted = sorted(o for q, o in inputs if q == p)
            if not wanted or any((p, o) in again for o in wanted):
                continue  # nothing to publish again there, or published again from the written offset on
            if forgotten:
                self.delete_input_below({p: hi})
                self.note(f"{topic}[{p}]'s offset {lo}, written by hand, was gone before a commit took it over: "
                          f"the pipeline resumed at its checkpoint's {hi}")
            else:
                self.violate("hand_reset_not_followed", f"{topic}[{p}]: offset {lo} written by hand "
                             f"{time.monotonic() - self.hand_at:.0f} s ago, the group's offset still there, yet "
                             f"the pipeline moved on to {committed.get(p)} without publishing any of "
                             f"{len(wanted)} records from {wanted[0]} again")

    # -- the judge -------------------------------------------------------------------------------
    def judge_run(self, job: JobProcess, code: int | None, *, what: str = "run", exit1_ok: bool = True,
                  settles: bool = True) -> None:
        """The exit contract of a run that no fault of the harness ended. ``settles``: an exit 0 means
        the pipeline's state is whole again (a run); a command that exits 0 without publishing (offsets
        restore) must still refuse a replaced or truncated input, and settles nothing else."""
        bad = run_violations(code, job.stderr)
        if bad:
            where = self.lab.keep_log(job, f"model-{self.seed}-step{self.step}")
            self.violate("unclear_exit", f"{what} exit {code}: {sorted(bad)}; log {where or 'not kept'}; "
                         f"{job.tail(3)!r}")
            return
        errors = error_lines(job.stderr)
        if code == 2:
            self.exit_2(errors[0], what)
        elif code == 0 and what != "plan-window":  # plan-window only reads
            if self.replaced:
                self.violate("replaced_input_not_detected", f"{what} exited 0 after the input topic was deleted "
                             "and re-created (it must stop with exit 2 naming the partition and a recovery command)")
            if self.truncated:
                self.violate("deleted_input_not_detected", f"{what} exited 0 after records of partitions "
                             f"{sorted(self.truncated)} past the committed position were deleted (it must stop with "
                             "exit 2 naming them and a recovery command)")
            if not settles:
                return
            self.replaced = self.grown = False
            self.truncated.clear()
            if not any(c is None for c in self.committed().values()):
                self.memory_lost = False  # every position is in the group and the new checkpoint topic again
            self.excused.clear()
            self.recovery = None
        elif code == 1 and not exit1_ok:
            self.violate("unexpected_exit_1", f"{what}: {errors[0]}")

    def exit_2(self, line: str, what: str) -> None:
        named = {int(p) for p in re.findall(re.escape(self.shop.topics.purchases) + r"\[(\d+)\]", line)}
        command = parse_recovery_command(line)
        if self.hand and "deleted before being processed" in line:
            self.follow_hand_reset()  # a hand-written offset gone: its record's position may be below the log
        if self.grown and "checkpoint topic" in line:
            pass  # the checkpoint topic must grow with the input (the line names how), checked first
        elif self.replaced:  # the operator must act: until the named command ran, every run stops so
            if not named:
                self.violate("exit_2_names_no_partition", line)
        elif self.truncated and "deleted before being processed" in line:
            if not named:
                self.violate("exit_2_names_no_partition", line)
        elif self.memory_lost and ("offsets restore --from-lineage" in line or "records were deleted from the "
                                                                             "outputs" in line):
            if not named:
                self.violate("exit_2_names_no_partition", line)
        else:
            self.violate("unexpected_exit_2", f"{what}: {line}")
        if command is None:
            self.violate("exit_2_without_recovery_command", line)
        self.excused |= named
        self.recovery = command

    def check(self) -> None:
        """Safety after a step, before any further run."""
        settled = self.lab.outputs_settled(self.shop, timeout_s=45)
        deadline = time.monotonic() + 45
        while True:
            try:  # a killed attempt's transaction may hold only the offsets: settled outputs do not show it
                self.follow_hand_reset()
                report = check_shop(self.shop, expected_ends=None, outputs_from=self.outputs_from)
                break
            except UnstableOffsetsError:
                if time.monotonic() > deadline:
                    self.violate("hanging_transaction", "the group's offsets stay held by a transaction for 55 s")
                    return
        for p, rep in report.partitions.items():
            for kind, n in rep.violations.items():
                if kind == "lost" and p in self.excused:
                    continue
                if kind == "beyond_commit" and self.memory_lost and rep.committed_offset is None:
                    continue  # the group and the checkpoint topic are gone: no position to judge against yet
                self.violate(kind, f"{self.shop.topics.purchases}[{p}] x{n}: {rep.examples.get(kind, [])[:2]}")
        if not settled:
            self.violate("hanging_transaction", "an output partition's LSO stays below its high watermark for 45 s")
