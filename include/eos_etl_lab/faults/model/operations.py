"""The model soak's operations: what each kind does, and its registration (:data:`OPERATIONS`).

Each ``op_<kind>`` method of :class:`Operations` carries one kind out on the history's
:class:`~.harness.Harness` and is registered right where it is defined, with its weight, how its
parameters are drawn, what it needs of the lab and whether it starts a run. The kinds are
registered in the order the generator draws from (:mod:`.history`): keep it, or every seed draws
another history. :data:`WEIGHTS`, :data:`BROKER_OPS`, :data:`CONNECT_OPS` and :data:`RUN_OPS` are
read from the registry.
"""

from __future__ import annotations

import random
import re
import signal
import sys
import time
import uuid
from dataclasses import replace

import psutil
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from eos_etl.checker import check_shop
from eos_etl.engine.planning.preflight import preflight
from eos_etl.engine.publishing.publisher import renew_positions
from eos_etl.errors import EosEtlError
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate

from ..clear_failure import error_lines, run_violations
from ..job_process import FAILPOINT_FIRED, PUBLISHING, JobProcess, run_window_args
from .harness import RUN_EXTRA, parse_recovery_command, wait_until
from .identity_operations import (
    IdentityOperations,
    draw_hand_offset_reset,
    draw_other_prefix,
    draw_partitions_added_between_plan_and_run,
    draw_paused_run,
    draw_race_other_grouping,
)
from .registry import Registry

#: Logged by the driver right before it commits the starts of partitions the group had no offset for.
STARTS_COMMIT = "transactional ids"
#: What a run logs when one of its attempts was fenced (not the summary's "fenced 0").
FENCED = re.compile(r"was fenced|the attempt that fenced|\bfenced [1-9]|ProducerFencedError|PRODUCER_FENCED")
#: The exit code of a process a ``crash`` failpoint ended (engine.failpoints: ``os._exit(97)``).
CRASH_EXIT = 97
#: Failpoints a crash may land on (engine.failpoints), in the publishing tasks.
CRASH_POINTS = ("after_init", "after_committed_read", "mid_produce", "before_send_offsets", "after_send_offsets",
                "before_commit", "after_commit", "before_report")
#: The private broker's offsets retention: a group's offsets are deleted a minute after their last commit.
OFFSETS_EXPIRE_S = 150.0
#: Every operation kind, registered by the method that carries it out.
OPERATIONS = Registry()


# -- how the kinds with parameters draw them (each from the history's rng, in this order) ----------
def _draw_produce(rng: random.Random) -> dict:
    # Now and then a window large enough that a kill lands mid-stream.
    count = 200_000 if rng.random() < 0.1 else rng.choice((3, 40, 200, 400))
    return {"count": count, "invalid": rng.choice((0.0, 0.1)),
            "aborted": rng.choice((0.0, 0.0, 0.3)), "txn": rng.choice((None, 50)), "seed": rng.randrange(1_000_000)}


def _draw_crash(rng: random.Random) -> dict:
    point = rng.choice(CRASH_POINTS)
    extra = {"after": rng.randrange(1, 150)} if point == "mid_produce" else {}
    return {"point": point, "action": rng.choice(("crash", "kill")), "partition": rng.randrange(2),
            "once": rng.random() < 0.7, **extra}


def _draw_signal(rng: random.Random) -> dict:
    return {"sig": rng.choice(("KILL", "KILL", "TERM")),
            "at": rng.choice(("starts_commit", "publishing", "publishing", "time")),
            "delay": round(rng.uniform(0.0, 3.0), 2)}


def _draw_plan_during_run(rng: random.Random) -> dict:
    return {"hold": rng.choice(("mid_produce", "after_send_offsets"))}


def _draw_truncate_input(rng: random.Random) -> dict:
    # Records deleted as retention would: only processed ones, or past the position.
    return {"beyond": rng.random() < 0.4, "share": round(rng.uniform(0.2, 1.0), 2)}


def _draw_broker_restart(rng: random.Random) -> dict:
    return {"down": round(rng.uniform(0.5, 3.0), 1), "delay": round(rng.uniform(0.0, 1.5), 2)}


def _draw_broker_pause(rng: random.Random) -> dict:
    return {"pause": round(rng.uniform(1.0, 6.0), 1), "delay": round(rng.uniform(0.0, 1.5), 2)}


def _draw_server_kill(rng: random.Random) -> dict:
    return {"sig": rng.choice(("KILL", "KILL", "TERM")), "delay": round(rng.uniform(0.0, 3.0), 2)}


class Operations(IdentityOperations):
    """What each operation kind does to the history's pipeline, and how it judges what it saw."""

    # -- purchases and runs ----------------------------------------------------------------------
    @OPERATIONS.register(6, draw=_draw_produce)
    def op_produce(self, count, invalid, aborted, txn, seed) -> None:
        stats = generate(self.shop.connection, self.shop.topics.purchases, count, invalid_share=invalid, seed=seed,
                         transaction_size=txn if txn or not aborted else 50, abort_share=aborted)
        self.out.records += stats.produced + stats.aborted

    @OPERATIONS.register(5, starts_run=True)
    def op_run(self, route="local") -> None:
        job = self.run_job(route=route)
        self.judge_run(job, self.finish(job))

    @OPERATIONS.register(3, draw=_draw_crash, starts_run=True)
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

    @OPERATIONS.register(3, draw=_draw_signal, starts_run=True)
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

    @OPERATIONS.register(1, starts_run=True)
    def op_concurrent(self, route="local") -> None:
        jobs = [self.run_job(["--run-id", f"twin{i}-{uuid.uuid4().hex[:6]}"], route=route) for i in (1, 2)]
        codes = [self.finish(j) for j in jobs]
        self.out.faults += 1
        for j, code in zip(jobs, codes, strict=True):
            self.judge_run(j, code, what="concurrent run")

    @OPERATIONS.register(1, draw=_draw_plan_during_run, starts_run=True)
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

    @OPERATIONS.register(1, starts_run=True)
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

    @OPERATIONS.register(1)
    def op_offsets_restore(self) -> None:
        # Judged as a run: it refuses (exit 2, naming the command) every state a run stops in.
        job = self.cli(["offsets", "restore", "--from-lineage"])
        self.judge_run(job, self.finish(job, 120), what="offsets restore", settles=False)

    # -- the input topic and the group -----------------------------------------------------------
    @OPERATIONS.register(1)
    def op_add_partitions(self) -> None:
        topic = self.shop.topics.purchases
        self.add_partitions(topic, len(self.lab.admin.partitions(topic)) + 1)
        self.grown = True

    @OPERATIONS.register(1)
    def op_recreate_input(self) -> None:
        topic = self.shop.topics.purchases
        admin = self.lab.admin
        n = len(admin.partitions(topic))
        had_commits = any(c for c in self.positions().values())  # a position past 0 would skip new records
        for t in self.shop.topics.outputs:  # outputs before now are the old input's
            self.outputs_from[t] = {p: o.high_watermark for p, o in admin.offsets(t, admin.partitions(t)).items()}
        self.recreate_topic(topic, n, readable=True)
        self.hand.clear()  # offsets written by hand went with the old topic
        if had_commits:
            self.replaced = True
            self.excused |= set(range(n))
        self.out.faults += 1

    @OPERATIONS.register(1)
    def op_delete_group(self) -> None:
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        try:
            client.delete_consumer_groups([self.shop.group])[self.shop.group].result(30)
        except Exception as exc:  # noqa: BLE001 - a group that never committed does not exist
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                raise
        if self.hand:
            self.hand_dropped = True  # offsets written by hand are gone with it

    @OPERATIONS.register(1, draw=_draw_truncate_input)
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

    # -- faults of the broker and the Connect server under a run ---------------------------------
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

    @OPERATIONS.register(2, draw=_draw_broker_restart, needs="broker", starts_run=True)
    def op_broker_restart(self, down, delay, route="local") -> None:
        broker = self.lab.broker
        self._fault_under_run(broker.kill, lambda: (time.sleep(down), broker.start()), delay, route)

    @OPERATIONS.register(1, draw=_draw_broker_pause, needs="broker", starts_run=True)
    def op_broker_pause(self, pause, delay, route="local") -> None:
        node = self.lab.broker.nodes[0]
        self._fault_under_run(node.pause, lambda: (time.sleep(pause), node.resume()), delay, route)

    @OPERATIONS.register(1, needs="broker")
    def op_expire_offsets(self) -> None:
        """Wait until the broker deleted the group's committed offsets (a minute after its last commit)."""
        if any(c is not None for c in self.committed().values()):
            wait_until(lambda: all(c is None for c in self.committed().values()), OFFSETS_EXPIRE_S,
                       "the broker to expire the group's offsets")
            if self.hand:
                self.hand_dropped = True  # offsets written by hand expired too

    @OPERATIONS.register(1, draw=_draw_server_kill, needs="connect", starts_run=True)
    def op_server_kill(self, sig, delay) -> None:
        """The Spark Connect server SIGKILLed or stopped (SIGTERM) while a client's window publishes;
        the client must end with a clear error, the restarted server then serve the next run."""
        server = self.lab.connect
        self._fault_under_run(lambda: psutil.Process(server.pid()).send_signal(getattr(signal, f"SIG{sig}")),
                              lambda: None, delay, "connect", what=f"run whose Connect server got SIG{sig}")

    # -- the positions' memory and the outputs ---------------------------------------------------
    @OPERATIONS.register(2)
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

    @OPERATIONS.register(1)
    def op_tick_then_recreate(self) -> None:
        """An idle tick, then the input topic deleted and created again: the tick's records must name
        the topic, or the next run resumes the new topic from the old positions."""
        self.op_idle_tick()
        self.op_recreate_input()

    @OPERATIONS.register(1)
    def op_delete_checkpoint_topic(self) -> None:
        """The checkpoint topic deleted and made again empty (``create-topics``): the positions live on
        in the group's offsets only, until those expire or the group is deleted."""
        topic = self.shop.pipeline().checkpoint_topic
        n = len(self.lab.admin.partitions(self.shop.topics.purchases))
        self.recreate_topic(topic, n)
        self.memory_lost = True
        self.out.faults += 1

    @OPERATIONS.register(1)
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

    @OPERATIONS.register(1)
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


# The identity's kinds, registered after every other (the generator's draw order: docs/pipeline-identity.md).
for _name, _weight, _draw in (("hand_offset_reset", 3, draw_hand_offset_reset),
                              ("race_other_grouping", 2, draw_race_other_grouping),
                              ("paused_run", 2, draw_paused_run),
                              ("partitions_added_between_plan_and_run", 2, draw_partitions_added_between_plan_and_run),
                              ("second_pipeline_same_group_other_prefix", 2, draw_other_prefix)):
    OPERATIONS.register(_weight, draw=_draw, starts_run=_name != "hand_offset_reset")(
        getattr(IdentityOperations, f"op_{_name}"))

OPERATIONS.verify(Operations)

#: Operation kinds and their weights, in the generator's order.
WEIGHTS = {kind.name: kind.weight for kind in OPERATIONS}
#: Kinds that need a lab that owns its broker (one whose group offsets expire a minute after their last commit).
BROKER_OPS = OPERATIONS.names(lambda kind: kind.needs == "broker")
#: Kinds that need a Spark Connect server.
CONNECT_OPS = OPERATIONS.names(lambda kind: kind.needs == "connect")
#: Kinds that start a run-window process (a history without one checks nothing of the engine).
RUN_OPS = OPERATIONS.names(lambda kind: kind.starts_run)
