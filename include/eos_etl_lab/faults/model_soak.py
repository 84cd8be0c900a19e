"""A randomized operation soak, in the style of Jepsen's Kafka workload.

A seeded generator (:func:`draw_history`, ``random.Random(seed)``) draws a history of operations
and faults against the real pipeline on a real broker: purchases produced (committed, aborted,
invalid), windows run, runs crashed at a failpoint or signalled, two runs of one window at once,
``plan-window`` during a run, a replay of a planned window, ``offsets restore``, input partitions
added, the input topic deleted and re-created, its records deleted (retention) below or beyond the
pipeline's position, the consumer group deleted, the broker restarted or paused under a run, the
group's offsets left to expire (the private broker keeps them one minute), and, with a Spark
Connect server, every run on either route (``route=local``: a spark-submit of its own;
``route=connect``: a client of the server) and the server killed under a run.
:func:`execute` runs a history on fresh topics and judges it after every step:

* safety, by the independent checker (:mod:`eos_etl.checker`): nothing committed without its
  outputs (unless a run stopped with exit 2 naming the partition), no duplicate, no torn pair, no
  output of an aborted input, nothing beyond the commit;
* every exit code as the contract says (:mod:`eos_etl.errors`): 0 done; 1 the world failed, a
  retry may help; 2 the operator must act, with one ``error:`` line naming the command that
  recovers; exit 2 only where the operator really must act (the input topic was replaced);
* per operation: ``plan-window`` writes and fences nothing (the run it overlaps is not fenced);
  a run after the input topic was re-created, or after records it had not processed were
  deleted, stops with exit 2 naming the partition;
* liveness, once the faults healed: at most :data:`RETRIES` runs (exit 1 retried, the named
  command of an exit 2 run first) bring the committed offsets level with the input's end, and the
  checker is exact.

A failing history is shrunk (:func:`shrink`: cut after the step that first failed, then delta
debugging, chunks then single operations removed; each candidate re-run on fresh topics, a racy
one up to ``repeats`` times) to the shortest that still shows the first violation's kind, and
printed as a numbered list with its seed (:func:`describe`).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import psutil
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from markupsafe import Markup

from eos_etl import paths
from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine import checkpoint_topic
from eos_etl.engine.checkpoint_log import read_entries
from eos_etl.engine.planning.preflight import preflight
from eos_etl.engine.publishing.publisher import renew_positions
from eos_etl.errors import EosEtlError
from eos_etl.host.ports import free_port
from eos_etl.jars.versions import KAFKA_VERSION, SPARK_VERSION
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import UnstableOffsetsError
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.settings import ShopSettings

from . import reliability_page as page
from .clear_failure import error_lines, run_violations
from .job_process import FAILPOINT_FIRED, PUBLISHING, JobProcess, run_window_args
from .lab import Lab, TrialResult
from .soak import CONNECT_MASTER, SHORT_RETENTION, save_results

log = logging.getLogger(__name__)

#: Runs (after the faults healed) that must bring the pipeline level with its input.
RETRIES = 4
#: Every run of the soak: small transactions (a fault lands between and inside them) and a short
#: transaction timeout, so a transaction a killed run left open is aborted by the broker in seconds.
RUN_EXTRA = ("--chunk-records", "100", "--chunk-seconds", "4", "--transaction-timeout-ms", "15000")
#: The bound of one run (a run still going then is killed and counted as hung).
RUN_BOUND_S = 240.0
#: Logged by the driver right before it commits the starts of partitions the group had no offset for.
STARTS_COMMIT = "transactional ids"
#: What a run logs when one of its attempts was fenced (not the summary's "fenced 0").
FENCED = re.compile(r"was fenced|the attempt that fenced|\bfenced [1-9]|ProducerFencedError|PRODUCER_FENCED")
#: The exit code of a process a ``crash`` failpoint ended (engine.failpoints: ``os._exit(97)``).
CRASH_EXIT = 97
#: Failpoints a crash may land on (engine.failpoints), in the publishing tasks.
CRASH_POINTS = ("after_init", "after_committed_read", "mid_produce", "before_send_offsets", "after_send_offsets",
                "before_commit", "after_commit", "before_report")

#: Operation kinds and their weights; ``broker`` ones need a lab that owns its broker (one whose
#: group offsets expire a minute after their last commit), ``connect`` ones a Spark Connect server.
WEIGHTS = {"produce": 6, "run": 5, "crash": 3, "signal": 3, "concurrent": 1, "plan_during_run": 1,
           "replay": 1, "offsets_restore": 1, "add_partitions": 1, "recreate_input": 1, "delete_group": 1,
           "truncate_input": 1, "broker_restart": 2, "broker_pause": 1, "expire_offsets": 1, "server_kill": 1,
           "idle_tick": 2, "tick_then_recreate": 1, "delete_checkpoint_topic": 1, "age_out": 1,
           "second_pipeline": 1}
BROKER_OPS = ("broker_restart", "broker_pause", "expire_offsets")
CONNECT_OPS = ("server_kill",)
#: Kinds that start a run-window process (a history without one checks nothing of the engine).
RUN_OPS = ("run", "crash", "signal", "concurrent", "plan_during_run", "replay", "broker_restart", "broker_pause",
           "server_kill")
#: Where a run's Spark is: a spark-submit of its own, or a client of the lab's Spark Connect server.
ROUTES = ("local", "connect")
#: The private broker's offsets retention: a group's offsets are deleted a minute after its last commit.
OFFSETS_EXPIRE_S = 150.0


@dataclass(frozen=True)
class Op:
    kind: str
    args: tuple = ()  # (name, value) pairs

    @property
    def a(self) -> dict:
        return dict(self.args)

    def describe(self) -> str:
        return self.kind + (" " + " ".join(f"{k}={v}" for k, v in self.args) if self.args else "")


def _op(kind: str, **args) -> Op:
    return Op(kind, tuple(args.items()))


def draw_op(rng: random.Random, kind: str, *, connect: bool = False) -> Op:
    """One operation of ``kind`` with its parameters drawn from ``rng``; with ``connect``, a run's route too."""
    op = _draw_args(rng, kind)
    if connect and kind in RUN_OPS and kind != "server_kill":
        op = Op(op.kind, op.args + (("route", rng.choice(ROUTES)),))
    return op


def _draw_args(rng: random.Random, kind: str) -> Op:
    if kind == "produce":  # now and then a window large enough that a kill lands mid-stream
        count = 200_000 if rng.random() < 0.1 else rng.choice((3, 40, 200, 400))
        return _op("produce", count=count, invalid=rng.choice((0.0, 0.1)),
                   aborted=rng.choice((0.0, 0.0, 0.3)), txn=rng.choice((None, 50)), seed=rng.randrange(1_000_000))
    if kind == "crash":
        point = rng.choice(CRASH_POINTS)
        extra = {"after": rng.randrange(1, 150)} if point == "mid_produce" else {}
        return _op("crash", point=point, action=rng.choice(("crash", "kill")), partition=rng.randrange(2),
                   once=rng.random() < 0.7, **extra)
    if kind == "signal":
        return _op("signal", sig=rng.choice(("KILL", "KILL", "TERM")),
                   at=rng.choice(("starts_commit", "publishing", "publishing", "time")),
                   delay=round(rng.uniform(0.0, 3.0), 2))
    if kind == "plan_during_run":
        return _op("plan_during_run", hold=rng.choice(("mid_produce", "after_send_offsets")))
    if kind == "broker_restart":
        return _op("broker_restart", down=round(rng.uniform(0.5, 3.0), 1), delay=round(rng.uniform(0.0, 1.5), 2))
    if kind == "broker_pause":
        return _op("broker_pause", pause=round(rng.uniform(1.0, 6.0), 1), delay=round(rng.uniform(0.0, 1.5), 2))
    if kind == "truncate_input":  # records deleted as retention would: only processed ones, or past the position
        return _op("truncate_input", beyond=rng.random() < 0.4, share=round(rng.uniform(0.2, 1.0), 2))
    if kind == "server_kill":
        return _op("server_kill", sig=rng.choice(("KILL", "KILL", "TERM")), delay=round(rng.uniform(0.0, 3.0), 2))
    return _op(kind)


def draw_history(seed: int, length: int, *, broker_ops: bool = True, connect: bool = False) -> tuple[int, list[Op]]:
    """(input partitions, ``length`` operations), reproducible from ``seed``. The history starts with
    purchases, holds at least one run; ``broker_ops``/``connect``: the kinds that need the lab's own
    broker or a Spark Connect server may be drawn (and, with ``connect``, every run's route)."""
    rng = random.Random(seed)
    kinds = [k for k in WEIGHTS if (broker_ops or k not in BROKER_OPS) and (connect or k not in CONNECT_OPS)]
    weights = [WEIGHTS[k] for k in kinds]
    partitions = rng.choice((1, 2, 2, 3))
    ops = [draw_op(rng, "produce")]
    while len(ops) < length:
        ops.append(draw_op(rng, rng.choices(kinds, weights)[0], connect=connect))
    if not any(o.kind in RUN_OPS for o in ops):
        ops[-1] = draw_op(rng, "run", connect=connect)
    return partitions, ops


def describe(seed: int, partitions: int, ops: list[Op]) -> str:
    lines = [f"seed {seed}: {partitions} input partition(s), {len(ops)} operations"]
    lines += [f"  {i}. {op.describe()}" for i, op in enumerate(ops, 1)]
    return "\n".join(lines)


@dataclass
class Violation:
    step: int  # 1-based operation, 0: the liveness phase after the history
    kind: str
    detail: str = ""

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step else "liveness"
        return f"{where}: {self.kind}{': ' + self.detail if self.detail else ''}"


@dataclass
class Outcome:
    """What executing one history found."""

    seed: int
    partitions: int
    ops: list[Op]
    violations: list[Violation] = field(default_factory=list)
    records: int = 0
    faults: int = 0
    recovery_s: float | None = None
    seconds: float = 0.0
    error: str = ""  # the history could not be carried out (the harness's failure, not the pipeline's)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.error

    @property
    def first_kind(self) -> str | None:
        return self.violations[0].kind if self.violations else None


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


class History:
    """One history executed against fresh topics of ``lab`` (its state and the model of it)."""

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

    # -- helpers -----------------------------------------------------------------------------
    def violate(self, kind: str, detail: str = "") -> None:
        v = Violation(self.step, kind, detail[:400])
        log.error("seed %s %s", self.seed, v)
        self.out.violations.append(v)

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

    def run_job(self, extra: list[str] = (), *, failpoints: str = "", route: str = "local") -> JobProcess:
        """A run on ``route``; a Connect run's tasks log to the server's log, read from where it stood now."""
        server = self.lab.connect if route == "connect" else None
        if route == "connect" and server is None:
            raise ValueError("a run on the Connect route needs a lab with a Spark Connect server")
        since = server.log_file.stat().st_size if server is not None and server.log_file.is_file() else 0
        job = self.lab.job(self.shop, [*RUN_EXTRA, *extra], failpoints=failpoints,
                           env=server.client_env() if server is not None else None)
        job.server, job.server_since = server, since
        return job.start()

    def output_of(self, job: JobProcess) -> str:
        """The run's own log and, on the Connect route, what its server logged since it started."""
        server = getattr(job, "server", None)
        return job.stderr + (server._log_since(job.server_since) if server is not None else "")

    def seen(self, job: JobProcess, needle: str) -> bool:
        """``needle`` in the run's own log or, on the Connect route, in what its server logged since."""
        return bool(job.count(needle)) or needle in self.output_of(job)

    def wait_seen(self, job: JobProcess, needle: str, timeout_s: float) -> bool:
        """Wait until :meth:`seen`; False once the run ended without it or on timeout."""
        if getattr(job, "server", None) is None:
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

    def committed(self) -> dict[int, int | None]:
        """The group's committed offsets (None: none, or expired)."""
        admin = self.lab.admin
        topic = self.shop.topics.purchases
        return admin.committed_offsets(self.shop.group, topic, admin.partitions(topic))

    def positions(self) -> dict[int, int | None]:
        """Each partition's position as the pipeline knows it: the group's offset, else its checkpoint record's."""
        topic = self.shop.topics.purchases
        entries = read_entries(self.shop.connection, checkpoint_topic.topic_for(self.shop.group), self.shop.group,
                               topic)
        return {p: c if c is not None else (entries[p].next_offset if p in entries else None)
                for p, c in self.committed().items()}

    # -- operations ----------------------------------------------------------------------------
    def op_produce(self, count, invalid, aborted, txn, seed) -> None:
        stats = generate(self.shop.connection, self.shop.topics.purchases, count, invalid_share=invalid, seed=seed,
                         transaction_size=txn if txn or not aborted else 50, abort_share=aborted)
        self.out.records += stats.produced + stats.aborted

    def op_run(self, route="local") -> None:
        job = self.run_job(route=route)
        self.judge_run(job, self.finish(job))

    def op_crash(self, point, action, partition, once, after=None, route="local") -> None:
        spec = f"{point}={action},partition={partition}" + (f",after={after}" if after else "")
        if once:
            spec += "," + self.once()
        job = self.run_job(failpoints=spec, route=route)
        code = self.finish(job)
        fired = self.seen(job, FAILPOINT_FIRED)
        self.out.faults += fired
        own = (action == "kill" and code == -signal.SIGKILL) or (action == "crash" and code == CRASH_EXIT)
        if code is not None and (fired or own):
            # The failpoint fired in the driver (a window with nothing to read publishes there): the fault.
            # Its own exit is proof enough: its "fired" line may die with the process before it is written.
            self.out.faults += not fired
            return
        self.judge_run(job, code, what=f"run crashed at {point}")

    def op_signal(self, sig, at, delay, route="local") -> None:
        job = self.run_job(route=route)
        needle = {"starts_commit": STARTS_COMMIT, "publishing": PUBLISHING}.get(at)
        if needle is None:
            job.wait(2.0 + delay * 3)
        elif not self.wait_seen(job, needle, 180):
            # Nothing to publish (or the window had no partition to start): the run ended first.
            self.judge_run(job, self.finish(job))
            return
        else:
            job.wait(delay / (6 if at == "starts_commit" else 1))
        if not job.alive:
            self.judge_run(job, job.proc.poll())
            return
        self.out.faults += 1
        if sig == "KILL":
            job.kill()
            return
        job.signal(signal.SIGTERM)
        code = self.finish(job, 60)
        if code is None:
            self.violate("sigterm_ignored", "the run was still going 60 s after SIGTERM")
        elif code > 0 and code not in (1, 2, 143):
            self.violate("unclear_exit", f"SIGTERM: exit {code}: {job.tail(3)!r}")

    def op_concurrent(self, route="local") -> None:
        jobs = [self.run_job(["--run-id", f"twin{i}-{uuid.uuid4().hex[:6]}"], route=route) for i in (1, 2)]
        codes = [self.finish(j) for j in jobs]
        self.out.faults += 1
        for j, code in zip(jobs, codes, strict=True):
            self.judge_run(j, code, what="concurrent run")

    def op_plan_during_run(self, hold, route="local") -> None:
        """A run holds a transaction open (a failpoint sleeps in it); plan-window runs meanwhile."""
        job = self.run_job(failpoints=f"{hold}=sleep:5,partition=0" + (",after=20" if hold == "mid_produce" else "")
                           + "," + self.once(), route=route)
        if not self.wait_seen(job, FAILPOINT_FIRED, 180):
            self.judge_run(job, self.finish(job))
            return
        plan = self.cli(["plan-window", "--compact"])
        plan_code = self.finish(plan, 60)
        self.judge_run(plan, plan_code, what="plan-window")
        if plan_code == 0:
            self.last_window = plan.stdout.strip().splitlines()[-1]
        code = self.finish(job)
        self.out.faults += 1
        if FENCED.search(self.output_of(job)):
            self.violate("plan_fenced_run", f"plan-window during the run fenced it (run exit {code}): "
                         f"{(error_lines(job.stderr) or [job.tail(1)])[0]}")
        self.judge_run(job, code, what="run overlapped by plan-window")

    def op_replay(self, route="local") -> None:
        """Run the last planned window (plan-window's JSON) again; without one, plan one now."""
        if self.last_window is None:
            plan = self.cli(["plan-window", "--compact"])
            code = self.finish(plan, 60)
            self.judge_run(plan, code, what="plan-window")
            if code != 0:
                return
            self.last_window = plan.stdout.strip().splitlines()[-1]
        job = self.run_job(["--window-json", self.last_window], route=route)
        code = self.finish(job)
        # A stale window is refused (exit 2: "plan again") or renews nothing; either is the contract's.
        bad = run_violations(code, job.stderr)
        if bad:
            self.violate("unclear_exit", f"replay exit {code}: {sorted(bad)}: {job.tail(3)!r}")
        elif code == 0:
            self.judge_run(job, code, what="replay")

    def op_offsets_restore(self) -> None:
        # Judged as a run: it refuses (exit 2, naming the command) every state a run stops in.
        job = self.cli(["offsets", "restore", "--from-lineage"])
        self.judge_run(job, self.finish(job, 120), what="offsets restore", settles=False)

    def op_add_partitions(self) -> None:
        topic = self.shop.topics.purchases
        n = len(self.lab.admin.partitions(topic)) + 1
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        client.create_partitions([NewPartitions(topic, n)])[topic].result(30)
        _wait(lambda: len(self.lab.admin.partitions(topic)) == n, 30, f"{topic} to have {n} partitions")
        self.grown = True

    def op_recreate_input(self) -> None:
        topic = self.shop.topics.purchases
        admin = self.lab.admin
        n = len(admin.partitions(topic))
        had_commits = any(c for c in self.positions().values())  # a position past 0 would skip new records
        for t in self.shop.topics.outputs:  # outputs before now are the old input's
            self.outputs_from[t] = {p: o.high_watermark for p, o in admin.offsets(t, admin.partitions(t)).items()}
        admin.delete_topics([topic])
        client = AdminClient(self.shop.connection.client_config())
        _wait(lambda: topic not in client.list_topics(timeout=10).topics, 60, f"{topic} to be deleted")
        spec = {s.name: s for s in self.shop.specs(n)}[topic]
        deadline = time.monotonic() + 60
        while True:
            try:
                ensure_topics(self.lab.admin, [spec], allow_existing=True)
                self.lab.admin.offsets(topic, list(range(n)))
                break
            except Exception:  # noqa: BLE001 - the deletion is still under way
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        if had_commits:
            self.replaced = True
            self.excused |= set(range(n))
        self.out.faults += 1

    def op_delete_group(self) -> None:
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        try:
            client.delete_consumer_groups([self.shop.group])[self.shop.group].result(30)
        except Exception as exc:  # noqa: BLE001 - a group that never committed does not exist
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                raise

    def op_idle_tick(self) -> None:
        """One tick of the DAG's plan task (``orchestration.dag_factory``): preflight, plan, and with
        nothing new, renew the positions (``renew_positions``); a stop is judged as a run's."""
        pipeline = self.shop.pipeline(run_id=f"tick-{self.seed}-{self.step}")
        try:
            preflight(pipeline, self.lab.admin)  # as the plan task does first
            window = self.shop.plan(pipeline=pipeline)
        except EosEtlError as exc:
            if exc.exit_code != 2:
                raise
            self.exit_2(f"error: {exc}", "idle tick")
            return
        if window.is_empty:
            renew_positions(pipeline, window)

    def op_tick_then_recreate(self) -> None:
        """An idle tick, then the input topic deleted and created again: the tick's records must name
        the topic, or the next run resumes the new topic from the old positions."""
        self.op_idle_tick()
        self.op_recreate_input()

    def op_delete_checkpoint_topic(self) -> None:
        """The checkpoint topic deleted and made again empty (``create-topics``): the positions live on
        in the group's offsets only, until those expire or the group is deleted."""
        topic = self.shop.pipeline().checkpoint_topic
        admin = self.lab.admin
        n = len(admin.partitions(self.shop.topics.purchases))
        admin.delete_topics([topic])
        client = AdminClient(self.shop.connection.client_config())
        _wait(lambda: topic not in client.list_topics(timeout=10).topics, 60, f"{topic} to be deleted")
        spec = {s.name: s for s in self.shop.specs(n)}[topic]
        _retry(lambda: ensure_topics(self.lab.admin, [spec], allow_existing=True), 60)
        self.memory_lost = True
        self.out.faults += 1

    def op_age_out(self) -> None:
        """Retention everywhere: the input's records the pipeline processed (below its position) and
        every output record written so far deleted."""
        admin = self.lab.admin
        topic = self.shop.topics.purchases
        offsets = admin.offsets(topic, admin.partitions(topic))
        upto = {p: min(c, offsets[p].high_watermark) for p, c in self.positions().items()
                if c is not None and c > offsets[p].earliest}
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        deletions = [TopicPartition(topic, p, o) for p, o in upto.items()]
        for t in self.shop.topics.outputs:
            deletions += [TopicPartition(t, p, o.last_stable) for p, o in admin.offsets(t, admin.partitions(t)).items()
                          if o.last_stable > o.earliest]
        if not deletions:
            self.out.notes.append(f"step {self.step}: nothing to age out")
            return
        for fut in client.delete_records(deletions).values():
            fut.result(30)
        self.out.faults += 1

    def op_second_pipeline(self) -> None:
        """A second pipeline (its own input, group and transactional ids) publishes to this one's output
        topics: 40 purchases, one run. Where deleted outputs leave nothing to prove its first run, it
        stops, the reset it names runs, and the run again. Its outputs must be exact; this pipeline's
        lineage must never count them (the checker after the step judges this one)."""
        if self.second is None:
            tag = self.shop.topics.purchases.removeprefix("purchases-")
            t = self.shop.topics
            self.second = replace(self.shop, group=f"group-eu-{tag}", transactional_id_prefix=f"txn-eu-{tag}",
                                  topics=replace(t, purchases=f"purchases-eu-{tag}"))
            ensure_topics(self.lab.admin, self.second.specs(2), allow_existing=True)
        second = self.second
        generate(second.connection, second.topics.purchases, 40, invalid_share=0.1, seed=self.seed * 1000 + self.step)
        for _ in range(3):
            job = JobProcess(run_window_args(second, list(RUN_EXTRA))).start()
            code = self.finish(job)
            if code == 0:
                report = check_shop(second, expected_ends=self.lab.input_ends(second))
                for kind, n in report.violations.items():
                    self.violate(f"second_pipeline_{kind}", f"x{n}: {report.to_dict()['partitions']}"[:400])
                return
            errors = error_lines(job.stderr)
            command = parse_recovery_command(errors[0]) if code == 2 and errors else None
            if command is None or "records were deleted from the outputs" not in errors[0]:
                self.violate("second_pipeline_exit", f"exit {code}: {job.tail(3)!r}")
                return
            fix = JobProcess([sys.executable, "-m", "eos_etl", *command, *second.to_args(),
                              "--bootstrap-servers", second.connection.bootstrap_servers]).start()
            if self.finish(fix, 120) != 0:
                self.violate("recovery_command_failed", f"second pipeline `{' '.join(command)}`: {fix.tail(2)!r}")
                return
        self.violate("second_pipeline_exit", "three runs did not publish its window")

    def _fault_under_run(self, fault, heal, delay, route="local", what="run under a broker fault") -> None:
        job = self.run_job(route=route)
        if not self.wait_seen(job, PUBLISHING, 180):
            self.judge_run(job, self.finish(job))
            return
        time.sleep(delay)
        fault()
        self.out.faults += 1
        try:
            heal()
        finally:
            code = self.finish(job)
            self.judge_run(job, code, what=what)

    def op_broker_restart(self, down, delay, route="local") -> None:
        broker = self.lab.broker
        self._fault_under_run(broker.kill, lambda: (time.sleep(down), broker.start()), delay, route)

    def op_broker_pause(self, pause, delay, route="local") -> None:
        node = self.lab.broker.nodes[0]
        self._fault_under_run(node.pause, lambda: (time.sleep(pause), node.resume()), delay, route)

    def op_server_kill(self, sig, delay) -> None:
        """The Spark Connect server SIGKILLed or stopped (SIGTERM) while a client's window publishes;
        the client must end with a clear error, the restarted server then serve the next run."""
        server = self.lab.connect
        self._fault_under_run(lambda: psutil.Process(server.pid()).send_signal(getattr(signal, f"SIG{sig}")),
                              lambda: None, delay, "connect", what=f"run whose Connect server got SIG{sig}")

    def op_truncate_input(self, beyond, share) -> None:
        """Delete input records as retention would: up to ``share`` of the way to the pipeline's position,
        or (``beyond``) ``share`` of the way past it into records no run processed yet."""
        topic = self.shop.topics.purchases
        admin = self.lab.admin
        parts = admin.partitions(topic)
        positions = self.positions()
        offsets = admin.offsets(topic, parts)
        upto = {}
        for p in parts:
            position = positions.get(p)
            low, end = offsets[p].earliest, offsets[p].high_watermark
            if beyond and position is not None and low <= position < end:
                upto[p] = position + max(1, int((end - position) * share))
            elif not beyond:
                # A position may lie past this log's end (the topic was re-created): nothing beyond the end.
                top = min(position, end) if position is not None else 0
                if top > low:
                    upto[p] = low + max(1, int((top - low) * share))
        if not upto:
            self.out.notes.append(f"step {self.step}: nothing to delete")
            return
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        for _p, fut in client.delete_records([TopicPartition(topic, p, o) for p, o in upto.items()]).items():
            fut.result(30)
        if beyond:
            self.truncated |= set(upto)
            self.out.faults += 1

    def op_expire_offsets(self) -> None:
        """Wait until the broker deleted the group's committed offsets (a minute after its last commit)."""
        if any(c is not None for c in self.committed().values()):
            _wait(lambda: all(c is None for c in self.committed().values()), OFFSETS_EXPIRE_S,
                  "the broker to expire the group's offsets")

    # -- the whole history ---------------------------------------------------------------------
    def heal(self) -> None:
        if self.lab.connect is not None and not self.lab.connect.is_running():
            self.lab.connect.start()
        broker = self.lab.broker
        if broker is not None:
            for node in broker.nodes:
                if node.is_paused():
                    node.resume()
            if not broker.is_running():
                broker.start()

    def cleared_by(self, command: list[str]) -> None:
        """What the operator's ``command`` leaves behind: a reset moves the positions of a replaced or
        truncated input (the next run must then be exact); growing the checkpoint topic, its partitions.
        Anything else still owed makes the next run stop again, as it must."""
        if command[:2] in (["offsets", "reset"], ["offsets", "restore"]):
            self.memory_lost = False
        if command[:2] == ["offsets", "reset"]:
            self.replaced = False
            self.truncated.clear()
        elif command[:1] in (["create-topics"], ["kafka-topics"]):
            self.grown = False

    def liveness(self) -> None:
        """After the faults healed: at most RETRIES runs (and the commands exit 2 named) bring the
        committed offsets level with the input's end, and the checker is exact."""
        self.step = 0
        t0 = time.monotonic()
        for attempt in range(RETRIES):
            job = self.run_job()
            code = self.finish(job)
            self.judge_run(job, code, what=f"liveness run {attempt + 1}")
            ends = self.lab.input_ends(self.shop)
            if code == 0 and self.committed() == ends:
                self.out.recovery_s = round(time.monotonic() - t0, 1)
                report = check_shop(self.shop, expected_ends=ends, outputs_from=self.outputs_from)
                for kind, n in report.violations.items():
                    self.violate(kind, f"x{n} after the pipeline caught up: {report.to_dict()['partitions']}"[:400])
                return
            if code == 2:
                if self.recovery is None:
                    self.violate("not_level", "exit 2 named no command to recover with")
                    return
                if self.recovery[0] == "kafka-topics":  # kafka-topics --alter --topic T --partitions N
                    client = AdminClient(self.shop.connection.client_config())
                    topic, n = self.recovery[1], int(self.recovery[2])
                    client.create_partitions([NewPartitions(topic, n)])[topic].result(30)
                    _wait(lambda topic=topic, n=n: len(self.lab.admin.partitions(topic)) == n, 30,
                          f"{topic} to have {n} partitions")
                    self.out.notes.append(f"grew {topic} to {n} partitions")
                    self.cleared_by(self.recovery)
                    self.recovery = None
                    continue
                fix = self.cli(self.recovery)
                fix_code = self.finish(fix, 120)
                if fix_code != 0:
                    self.violate("recovery_command_failed", f"`{' '.join(self.recovery)}` exit {fix_code}: "
                                 f"{fix.tail(2)!r}")
                    return
                self.out.notes.append(f"ran `{' '.join(self.recovery)}`")
                self.cleared_by(self.recovery)
                self.recovery = None
        self.violate("not_level", f"{RETRIES} runs after the faults healed: committed {self.committed()}, input "
                     f"ends {self.lab.input_ends(self.shop)}")

    def execute(self) -> Outcome:
        t0 = time.monotonic()
        try:
            for i, op in enumerate(self.ops, 1):
                self.step = i
                log.info("seed %s step %d/%d: %s", self.seed, i, len(self.ops), op.describe())
                getattr(self, f"op_{op.kind}")(**op.a)
                self.heal()
                self.check()
            self.heal()
            self.liveness()
        except Exception as exc:  # noqa: BLE001 - reported as a history not carried out, never a pass
            log.exception("seed %s: history could not be carried out", self.seed)
            self.out.error = f"step {self.step}: {type(exc).__name__}: {exc}"[:500]
            try:
                self.heal()
            except Exception:  # noqa: BLE001 - the next history heals again; this one is reported already
                log.exception("seed %s: healing after the history failed", self.seed)
        self.out.seconds = round(time.monotonic() - t0, 1)
        return self.out


def _retry(action, timeout_s: float) -> None:
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


def _wait(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f}s for {what}")
        time.sleep(0.5)


def execute(lab: Lab, seed: int, partitions: int, ops: list[Op]) -> Outcome:
    """Run ``ops`` on fresh topics, group and transactional ids of ``lab`` and judge them."""
    return History(lab, seed, partitions, ops).execute()


def shrink(lab: Lab, failing: Outcome, *, budget: int = 8, repeats: int = 1) -> Outcome:
    """The smallest history found within ``budget`` re-executions that still shows ``failing``'s first
    violation kind (each on fresh topics): first the history cut after the step that failed (what
    came later cannot have caused it), then delta debugging (ddmin) over the operations. A candidate
    that does not fail is executed again up to ``repeats`` times in all: a kill lands a little
    differently each time, so one clean execution does not clear it."""
    target = failing.first_kind
    best = failing
    tries = 0

    def fails(candidate: list[Op]) -> Outcome | None:
        nonlocal tries
        for _ in range(repeats):
            if tries >= budget:
                return None
            tries += 1
            log.info("shrinking seed %s: try %d, %d of %d operations", failing.seed, tries, len(candidate),
                     len(best.ops))
            outcome = execute(lab, failing.seed, failing.partitions, candidate)
            if any(v.kind == target for v in outcome.violations):
                return outcome
        return None

    step = failing.violations[0].step if failing.violations else 0
    if 0 < step < len(best.ops) and any(o.kind in RUN_OPS for o in best.ops[:step]):
        best = fails(best.ops[:step]) or best
    n = 2
    while len(best.ops) > 1 and tries < budget:
        ops = best.ops
        size = max(1, len(ops) // n)
        chunks = [ops[i:i + size] for i in range(0, len(ops), size)]
        reduced = False
        for i in range(len(chunks)):
            candidate = [o for j, c in enumerate(chunks) if j != i for o in c]
            if not candidate or not any(o.kind in RUN_OPS for o in candidate) or tries >= budget:
                continue
            if (outcome := fails(candidate)) is not None:
                best, reduced = outcome, True
                n = max(n - 1, 2)
                break
        if not reduced:
            if size == 1:
                break
            n = min(n * 2, len(ops))
    return best


@dataclass
class ModelSoakOptions:
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    length: int = 8  # operations per history
    shrink_budget: int = 8  # re-executions per failing seed
    broker_ops: bool = True
    connect: bool = False  # a Spark Connect server: runs on either route, the server killed under a run
    shrink_repeats: int = 2  # executions of a candidate before it counts as not failing


def run_histories(lab: Lab, opts: ModelSoakOptions, on_done=None) -> list[tuple[Outcome, Outcome | None]]:
    """Every seed's history, executed and judged; a failing one shrunk: [(outcome, shortest failing)]."""
    done = []
    for seed in opts.seeds:
        partitions, ops = draw_history(seed, opts.length, broker_ops=opts.broker_ops and lab.broker is not None,
                                       connect=lab.connect is not None)
        log.info("%s", describe(seed, partitions, ops))
        outcome = execute(lab, seed, partitions, ops)
        shortest = None
        if outcome.violations and opts.shrink_budget:
            shortest = shrink(lab, outcome, budget=opts.shrink_budget, repeats=opts.shrink_repeats)
        done.append((outcome, shortest))
        print(report_history(outcome, shortest), flush=True)
        if on_done is not None:
            on_done(done)
    return done


def report_history(outcome: Outcome, shortest: Outcome | None) -> str:
    head = "ok" if outcome.ok else ("NOT CARRIED OUT: " + outcome.error if outcome.error else "VIOLATIONS")
    lines = [f"{describe(outcome.seed, outcome.partitions, outcome.ops)}\n  -> {head} "
             f"({outcome.seconds:.0f} s, recovery {outcome.recovery_s} s)"]
    lines += [f"     {v}" for v in outcome.violations]
    if shortest is not None:
        lines.append(f"  shortest history still showing {outcome.first_kind}:")
        lines.append("  " + describe(shortest.seed, shortest.partitions, shortest.ops).replace("\n", "\n  "))
        lines += [f"       {v}" for v in shortest.violations]
    return "\n".join(lines)


def classify(v: Violation) -> str:
    """Which known defect a violation is (or NEW)."""
    if v.kind == "unexpected_exit_2" and "published before" in v.detail:
        return "known: no committed offset but published before (stall after a killed first run)"
    if v.kind in ("replaced_input_not_detected", "exit_2_names_no_partition"):
        return "known: re-created input topic not detected"
    if v.kind == "plan_fenced_run":
        return "known: plan-window fences live transactions"
    return "NEW"


def as_trials(done: list[tuple[Outcome, Outcome | None]]) -> list[TrialResult]:
    """The histories as the soaks' :class:`TrialResult` rows (results.json, the page)."""
    rows = []
    for outcome, shortest in done:
        kinds: dict[str, int] = {}
        for v in outcome.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        detail = "; ".join(str(v) for v in outcome.violations[:3])
        if shortest is not None:
            detail += " | shortest: " + ", ".join(f"{i}. {o.describe()}" for i, o in enumerate(shortest.ops, 1))
        rows.append(TrialResult(scenario="model", trial=f"seed={outcome.seed}", records=outcome.records,
                                kills=outcome.faults, violations=kinds, seconds=outcome.seconds, error=outcome.error,
                                recovery_s=outcome.recovery_s, detail=detail or "ok",
                                counters={"operations": len(outcome.ops),
                                          "shortest": len(shortest.ops) if shortest else None}))
    return rows


def ops_json(ops: list[Op]) -> str:
    return json.dumps([[o.kind, dict(o.args)] for o in ops])


def run_model_soak(opts: ModelSoakOptions, on_done=None) -> tuple[list[tuple[Outcome, Outcome | None]], float]:
    """Every seed on a private broker under var/soak-model (restarted, paused and killed freely; it
    deletes a group's offsets a minute after their last commit), with ``opts.connect`` a Spark
    Connect server of its own there too."""
    root = paths.var_dir() / "soak-model"
    shutil.rmtree(root / "kafka", ignore_errors=True)
    broker = KafkaCluster(home=root / "kafka", port=free_port(), overrides=SHORT_RETENTION)
    broker.start()
    lab = Lab(KafkaConnection(broker.bootstrap_servers), broker=broker if opts.broker_ops else None,
              log_dir=root / "logs")
    if opts.connect:
        try:
            lab.connect = SparkConnectServer(home=root / "spark-connect", port=free_port(),
                                             master=CONNECT_MASTER).start()
        except BaseException:
            broker.stop()
            raise
    t0 = time.monotonic()
    results = paths.var_dir() / "soak-model" / "results.json"

    def progress(done_so_far):
        save_results(as_trials(done_so_far), time.monotonic() - t0, results)
        if on_done is not None:
            on_done(done_so_far)

    try:
        done = run_histories(lab, opts, progress)
    finally:
        if lab.connect is not None:
            lab.connect.stop()
        broker.stop()
    return done, time.monotonic() - t0


MODEL_SECTION = "model soak"


def write_markdown(done: list[tuple[Outcome, Outcome | None]], wall: float, opts: ModelSoakOptions, command: str,
                   out=None):
    """The model soak's section of docs/reliability.md (``templates/model_soak.md.j2``)."""
    out = out or paths.project_root() / "docs" / "reliability.md"
    rows, counts, routes = [], {}, {}
    for outcome, shortest in done:
        for op in outcome.ops:
            counts[op.kind] = counts.get(op.kind, 0) + 1
            if route := op.a.get("route", "connect" if op.kind in CONNECT_OPS else None):
                routes[route] = routes.get(route, 0) + 1
        kinds: dict[str, int] = {}
        for v in outcome.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        failing = shortest or (outcome if not outcome.ok else None)
        history = ""
        if failing is not None:
            text = describe(failing.seed, failing.partitions, failing.ops) + "\n" + "\n".join(
                f"  ! {str(v)[:240]}" for v in failing.violations) + (f"\n  ! NOT CARRIED OUT: {failing.error}"
                                                                     if failing.error else "")
            # Shown in a fenced code block, as it is: no entity, and no fence of its own to end the block.
            history = Markup(text.replace("```", "'''"))
        rows.append({"seed": outcome.seed, "partitions": outcome.partitions, "operations": len(outcome.ops),
                     "faults": outcome.faults, "records": outcome.records,
                     "violations": (", ".join(f"{k}={n}" for k, n in kinds.items()) or "0")
                     + (f" (not carried out: {outcome.error})" if outcome.error else ""),
                     "recovery_s": outcome.recovery_s, "seconds": outcome.seconds,
                     "shortest": (f"{len(shortest.ops)} operations" if shortest else
                                  ("not shrunk" if not outcome.ok else "-")),
                     "failing": not outcome.ok, "history": history,
                     "classes": ", ".join(sorted({classify(v) for v in (failing or outcome).violations}))
                     or "not carried out"})
    recoveries = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
    totals = {"histories": len(rows), "operations": sum(r["operations"] for r in rows),
              "faults": sum(r["faults"] for r in rows), "records": sum(r["records"] for r in rows),
              "violations": sum(len(o.violations) for o, _ in done), "failing": sum(r["failing"] for r in rows),
              "errors": sum(bool(o.error) for o, _ in done),
              "longest_recovery_s": max(recoveries) if recoveries else None}
    text = page.render("model_soak.md.j2", command=command, generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
                       machine=page.machine(), kafka_version=KAFKA_VERSION, spark_version=SPARK_VERSION, rows=rows,
                       totals=totals, ok=totals["failing"] == 0, wall_min=wall / 60, length=opts.length,
                       retries=RETRIES, shrink_budget=opts.shrink_budget, shrink_repeats=opts.shrink_repeats,
                       connect=opts.connect,
                       op_counts=", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])),
                       route_counts=", ".join(f"{k} {n}" for k, n in sorted(routes.items())))
    page.write_section(out, MODEL_SECTION, text)
    return out
