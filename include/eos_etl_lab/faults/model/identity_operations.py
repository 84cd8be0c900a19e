"""The model soak's operations on the pipeline's identity: who may commit a partition (docs/pipeline-identity.md).

Offsets written by hand, a run of another grouping or prefix racing the scheduled one, a run paused at a
drawn log line and resumed after another finished, partitions added between a plan and its run, a second
pipeline under another prefix on the same group. The methods of :class:`IdentityOperations` are registered
by :mod:`.operations`, after every other kind (the generator's draw order); their parameters' draws are here.
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from eos_etl.engine import slots as writer_slots
from eos_etl.engine.identity import Identity
from eos_etl.shop.generator import generate

from ..clear_failure import error_lines, run_violations
from ..job_process import JobProcess
from .harness import Harness, parse_recovery_command
from .pause_hook import pausing_env, wait_paused

#: The ``--writer-slots`` a run of another grouping is drawn with (one other than the pipeline's is taken).
GROUPINGS = ("1", "2", "3", "per-partition")
#: Where a paused run stops: right after one of the first lines every run logs (a run with records to read
#: logs about 6: preflight, its plan, its window and ids, its query, visibility, its end; one with nothing to
#: read 5; one refused for its settings 1), or now and then after one of those only a first run (the
#: identity, the start commits: 14 on 2 partitions) or a longer one reaches. A run that logs fewer runs to
#: its end unpaused.
PAUSE_LINES = (6, 14)

def draw_hand_offset_reset(rng: random.Random) -> dict:
    # Per partition (drawn in the operation from ``seed``): where it is, back, forward, or anywhere in its log.
    return {"to": rng.choice(("current", "back", "back", "forward", "any", "any")), "seed": rng.randrange(1_000_000)}


def draw_race_other_grouping(rng: random.Random) -> dict:
    return {"differs": rng.choice(("writer_slots", "writer_slots", "prefix")), "slots": rng.choice(GROUPINGS),
            "first": rng.choice(("scheduled", "other")), "delay": round(rng.uniform(0.0, 4.0), 2)}


def draw_paused_run(rng: random.Random) -> dict:
    # Mostly among the lines every run logs; now and then among those only a first run or a long one reaches.
    line = rng.randint(1, PAUSE_LINES[0]) if rng.random() < 0.75 else rng.randint(PAUSE_LINES[0] + 1, PAUSE_LINES[1])
    return {"line": line, "settings": rng.choice(("scheduled", "other_grouping")), "slots": rng.choice(GROUPINGS)}


def draw_partitions_added_between_plan_and_run(rng: random.Random) -> dict:
    return {"added": rng.choice((1, 1, 2)), "count": rng.choice((0, 40, 200)),
            "produce_at": rng.choice(("before_run", "after_run")), "seed": rng.randrange(1_000_000)}


def draw_other_prefix(rng: random.Random) -> dict:
    return {"count": rng.choice((0, 40, 200)), "seed": rng.randrange(1_000_000)}


def hand_reset_targets(to: str, seed: int, bounds: dict[int, tuple[int, int]],
                       positions: dict[int, int | None]) -> dict[int, int]:
    """The offsets a hand reset writes: per partition, within its log ``bounds`` (log start, last stable
    offset): ``current`` its position (clamped into the log; none: the log start), ``back`` at or below
    it, ``forward`` at or above it, ``any`` anywhere; drawn from ``seed``, partition by partition."""
    rng = random.Random(seed)
    out = {}
    for p in sorted(bounds):
        low, top = bounds[p]
        at = positions.get(p)
        now = low if at is None else min(max(at, low), top)
        if to == "current":
            out[p] = now
        elif to == "back":
            out[p] = rng.randint(low, now)
        elif to == "forward":
            out[p] = rng.randint(now, top)
        elif to == "any":
            out[p] = rng.randint(low, top)
        else:
            raise ValueError(f"a hand reset goes current, back, forward or any, not {to!r}")
    return out


def other_grouping(drawn: str, reference: int | None) -> int | None:
    """A grouping other than ``reference`` (the pipeline's): ``drawn`` (a ``--writer-slots`` value of
    :data:`GROUPINGS`), or the next of them where it is the reference."""
    at = GROUPINGS.index(drawn)
    for option in (*GROUPINGS[at:], *GROUPINGS[:at]):
        if writer_slots.parse(option) != reference:
            return writer_slots.parse(option)
    raise AssertionError("GROUPINGS holds more than one grouping")




class IdentityOperations(Harness):
    """The identity's operation kinds (registered in :mod:`.operations`)."""

    def op_hand_offset_reset(self, to, seed) -> None:
        """The group's offsets written by hand with Kafka's own API (``alter_consumer_group_offsets``,
        offsets and no metadata: what ``kafka-consumer-groups --reset-offsets`` writes), per partition at a
        value drawn within its log (:func:`hand_reset_targets`). They are the position the next window
        starts at, never a stall: the next run must publish from there (a stop is judged as any run's).

        Moved backwards, the range re-read is the operator's request: its outputs are expected again; moved
        forwards, the records skipped are the operator's decision. The checker cannot tell a deliberate
        republication from a duplicate, so from here on it judges the outputs written after now
        (``outputs_from``, as after the input topic was re-created), and the input records below the offsets
        written, published before now or skipped, are deleted (retention would delete them too). Where a
        partition's checkpoint record says another position, :meth:`~.harness.Harness.follow_hand_reset`
        follows the offset until a commit takes it over (the broker may expire it first)."""
        topic = self.shop.topics.purchases
        admin = self.lab.admin
        parts = admin.partitions(topic)
        offsets = admin.offsets(topic, parts)
        positions, records = self.positions(), self.records()
        target = hand_reset_targets(to, seed, {p: (o.earliest, o.last_stable) for p, o in offsets.items()},
                                    positions)
        moved = sorted(p for p in parts if target[p] != positions.get(p))
        if moved:
            self.outputs_from = self.output_ends()  # outputs before now: of the positions before the reset
        client = AdminClient(self.shop.connection.client_config())  # held: its futures die with it
        request = ConsumerGroupTopicPartitions(self.shop.group, [TopicPartition(topic, p, o)
                                                                 for p, o in target.items()])
        for fut in client.alter_consumer_group_offsets([request]).values():
            fut.result(30)
        if moved:
            self.delete_input_below(target)
        topic_id = admin.topic_id(topic)
        stale = {p for p, r in records.items() if r.on_other_topic(topic_id)}  # of a topic deleted since
        if self.replaced:  # a record of the old topic stops every run, but where the position is 0 on a log from 0
            self.replaced = any(p in stale and (target[p], offsets[p].earliest) != (0, 0) for p in parts)
        self.truncated.clear()  # every position is within its log now
        self.hand = {p: (o, records[p].next_offset if p in records else None) for p, o in target.items()
                     if p not in stale and (records[p].next_offset if p in records else None) != o}
        self.hand_at, self.hand_dropped = time.monotonic(), False
        self.note(f"hand reset ({to}): offsets {target}, positions were {positions}")

    def _grouping(self, recorded: Identity | None) -> int | None:
        """The pipeline's grouping: its record's, else what its first run would record."""
        if recorded is not None:
            return recorded.writer_slots
        if self.shop.writer_slots == writer_slots.AS_COMMITTED:
            return writer_slots.DEFAULT_WRITER_SLOTS
        return self.shop.writer_slots

    def _other_settings(self, differs: str, slots: str, recorded: Identity | None) -> tuple[list[str], dict]:
        """The options of a run that disagrees with the pipeline in ``differs`` (its prefix, or its grouping:
        ``slots`` or the next of :data:`GROUPINGS`), and the identity fields it would record."""
        if differs == "prefix":
            prefix = f"{self.shop.transactional_id_prefix}-other"
            return ["--transactional-id-prefix", prefix], {"transactional_id_prefix": prefix}
        grouping = other_grouping(slots, self._grouping(recorded))
        return ["--writer-slots", writer_slots.option(grouping)], {"writer_slots": grouping}

    @staticmethod
    def _names(recorded: Identity | None, settings: dict) -> bool:
        return recorded is not None and all(getattr(recorded, k) == v for k, v in settings.items())

    def _judge_other(self, job: JobProcess, code: int | None, run_id: str, won: bool, what: str) -> None:
        """A run with settings other than the pipeline's: a clear exit, and refused (exit 2) or publishing
        nothing; unless it recorded a new pipeline's identity first: then it is the pipeline's run."""
        if won:
            self.judge_run(job, code, what=f"{what}, which recorded the pipeline first")
            return
        bad = run_violations(code, job.stderr)
        if bad:
            where = self.lab.keep_log(job, f"model-{self.seed}-step{self.step}")
            self.violate("unclear_exit", f"{what} exit {code}: {sorted(bad)}; log {where or 'not kept'}; "
                         f"{job.tail(3)!r}")
        elif code != 2 and (n := self.published_by(run_id)):
            self.violate("other_settings_published", f"{what} (exit {code}) published {n} output records under "
                         f"ids the pipeline's identity does not name: {(error_lines(job.stderr) or [''])[0]}")

    def _judge_scheduled(self, job: JobProcess, code: int | None, won: bool, what: str) -> str | None:
        """The scheduled run beside one of other settings, judged as a run. Where the other recorded a new
        pipeline's identity first, it may be refused (exit 2, naming ``offsets reslot``): that line is
        returned, for the operator's way back once no run is going on (:meth:`_reslot_back`)."""
        errors = error_lines(job.stderr)
        if (won and code == 2 and len(errors) == 1 and "offsets reslot" in errors[0]
                and not run_violations(code, job.stderr)):
            return errors[0]
        self.judge_run(job, code, what=what)
        return None

    def _reslot_back(self, line: str) -> None:
        """The command a refused scheduled run named: the pipeline recorded with the scheduled settings again
        (every id the record named before fenced)."""
        command = parse_recovery_command(line)
        if command is None:
            self.violate("exit_2_without_recovery_command", line)
            return
        fix = self.cli(command)
        code = self.finish(fix, 120)
        if code != 0:
            self.violate("recovery_command_failed", f"`{' '.join(command)}` exit {code}: {fix.tail(2)!r}")
            return
        self.note(f"ran `{' '.join(command)}`")
        if not self._names(self.identity(), {"transactional_id_prefix": self.shop.transactional_id_prefix}):
            self.violate("reslot_not_recorded", f"`{' '.join(command)}` exit 0, the identity: {self.identity()}")

    def op_race_other_grouping(self, differs, slots, first, delay, route="local") -> None:
        """A run with another ``--writer-slots`` (or another ``--transactional-id-prefix``) started beside the
        scheduled run, ``delay`` seconds before or after it; both finish. Ids of two groupings or prefixes
        never fence each other, so the pipeline's identity must: never a duplicate or a loss (the checker
        after the step), and the other run is refused (exit 2: its settings disagree with the record) or
        publishes nothing. On a new pipeline the first to record the identity is the pipeline: the other
        then is the run refused, and the scheduled run's refusal names the reslot that makes the pipeline
        the scheduled one again, which runs after both."""
        recorded = self.identity()
        other, settings = self._other_settings(differs, slots, recorded)
        tag = uuid.uuid4().hex[:6]
        ids = {"scheduled": f"scheduled-{tag}", "other": f"other-{tag}"}
        extra = {"scheduled": ["--run-id", ids["scheduled"]], "other": [*other, "--run-id", ids["other"]]}
        jobs = {}
        for i, who in enumerate(("scheduled", "other") if first == "scheduled" else ("other", "scheduled")):
            if i:
                time.sleep(delay)
            jobs[who] = self.run_job(extra[who], route=route)
        codes = {who: self.finish(job) for who, job in jobs.items()}
        self.out.faults += 1
        won = recorded is None and self._names(self.identity(), settings)
        what = f"run with {' '.join(other)} beside the scheduled run"
        self._judge_other(jobs["other"], codes["other"], ids["other"], won, what)
        refused = self._judge_scheduled(jobs["scheduled"], codes["scheduled"], won,
                                        f"scheduled run beside one with {' '.join(other)}")
        self.note(f"race ({' '.join(other)}, {first} first, {delay} s apart): scheduled exit {codes['scheduled']}, "
                  f"other exit {codes['other']}{', which recorded the pipeline first' if won else ''}")
        if refused is not None:
            self._reslot_back(refused)

    def op_paused_run(self, line, settings, slots, route="local") -> None:
        """A run (the scheduled settings, or another grouping) SIGSTOPs itself right after its ``line``-th log
        line (:mod:`.pause_hook`; its whole process tree is stopped with it: a frozen VM), the scheduled run
        runs to its end meanwhile, and the paused run is resumed (SIGCONT). The checker must be clean before
        it resumes and after (the step's check). Resumed, it may exit 0 having published nothing more (when
        the scheduled run finished the window), 1 (fenced) or 2 (refused), each with one clear line. A run
        that logs fewer lines ends unpaused and is judged as a run."""
        recorded = self.identity()
        other, wanted = self._other_settings("writer_slots", slots, recorded) if settings == "other_grouping" \
            else ([], {})
        tag = uuid.uuid4().hex[:6]
        paused_id, scheduled_id = f"paused-{tag}", f"scheduled-{tag}"
        server = self.lab.connect if route == "connect" else None
        env = pausing_env(Path(self.tmp) / "pause-hook", line, server.client_env() if server is not None else None)
        job = self.run_job([*other, "--run-id", paused_id], route=route, env=env)
        what = f"run{' with ' + ' '.join(other) if other else ''} paused at its log line {line}"
        if not wait_paused(job, 180):
            code = self.finish(job)
            self.note(f"paused run ({settings}): ended unpaused, exit {code}, before its log line {line}")
            won = not other or (recorded is None and self._names(self.identity(), wanted))
            self._judge_other(job, code, paused_id, won, what.replace(" paused at", " not paused before"))
            return
        job.pause()  # the rest of its tree (Spark's JVM, the Python workers) with it
        self.out.faults += 1
        scheduled = self.run_job(["--run-id", scheduled_id], route=route)
        scheduled_code = self.finish(scheduled)
        won = bool(other) and recorded is None and self._names(self.identity(), wanted)
        refused = self._judge_scheduled(scheduled, scheduled_code, won, f"scheduled run beside a {what}")
        self.check()  # clean before the paused run resumes
        before = self.published_by(paused_id)
        job.resume()
        code = self.finish(job)
        bad = run_violations(code, job.stderr)
        if bad:
            where = self.lab.keep_log(job, f"model-{self.seed}-step{self.step}")
            self.violate("unclear_exit", f"resumed {what}: exit {code}: {sorted(bad)}; log {where or 'not kept'}; "
                         f"{job.tail(3)!r}")
        elif scheduled_code == 0 and (more := self.published_by(paused_id) - before) > 0:
            self.violate("paused_run_published_again", f"resumed {what} (exit {code}) published {more} more output "
                         f"records after the scheduled run finished the window: {(error_lines(job.stderr) or [''])[0]}")
        self.note(f"paused run ({settings}, line {line}{', it recorded the pipeline first' if won else ''}): "
                  f"scheduled exit {scheduled_code}, resumed exit {code}: "
                  f"{(error_lines(job.stderr) or ['-'])[0][:160]}")
        if refused is not None:
            self._reslot_back(refused)

    def op_partitions_added_between_plan_and_run(self, added, count, produce_at, seed, route="local") -> None:
        """The DAG's two tasks apart: ``plan-window`` saves a window; ``added`` input partitions are added
        and ``create-topics --allow-existing`` run (docs/operations.md); the saved window runs
        (``run-window --window-json @file``); purchases (``count``) land before that run or after it; the
        next plain run must then exit 0: the added partitions are new (they start from their beginning),
        whatever the planned run's records say."""
        plan = self.cli(["plan-window", "--compact"])
        plan_code = self.finish(plan, 60)
        self.judge_run(plan, plan_code, what="plan-window")
        if plan_code != 0:
            return
        window = Path(self.tmp) / f"window-step{self.step}.json"
        window.write_text(plan.stdout.strip().splitlines()[-1])
        topic = self.shop.topics.purchases
        self.add_partitions(topic, len(self.lab.admin.partitions(topic)) + added)
        grow = self.cli(["create-topics", "--allow-existing"])
        grow_code = self.finish(grow, 120)
        if grow_code != 0:
            self.violate("create_topics_failed", f"create-topics --allow-existing after partitions were added: exit "
                         f"{grow_code}: {grow.tail(2)!r}")
            self.grown = True
            return
        self.grown = False  # the checkpoint topic has as many partitions as the input again

        def produce() -> None:
            if count:
                stats = generate(self.shop.connection, topic, count, invalid_share=0.1, seed=seed)
                self.out.records += stats.produced + stats.aborted

        if produce_at == "before_run":
            produce()
        job = self.run_job(["--window-json", f"@{window}"], route=route)
        planned_code = self.finish(job)
        self.judge_run(job, planned_code, what="the window planned before partitions were added")
        if produce_at == "after_run":
            produce()
        after = self.run_job(route=route)
        after_code = self.finish(after)
        self.judge_run(after, after_code, what="the run after a window planned before partitions were added",
                       exit1_ok=False)
        self.note(f"partitions added between plan and run (+{added}): planned run exit {planned_code}"
                  f"{': ' + error_lines(job.stderr)[0][:160] if planned_code else ''}; next run exit {after_code}")

    def op_second_pipeline_same_group_other_prefix(self, count, seed, route="local") -> None:
        """A second pipeline made with the same group and input but another transactional-id prefix: its run
        must stop (exit 2, one line naming ``offsets reslot``) before it reads, publishes or fences anything:
        the group's offsets, the checkpoint records and the outputs as they were (a group offset may only
        have expired meanwhile). With ``count``, new purchases wait to be read. A pipeline with no identity
        yet is made first, as ``create-topics`` makes one (it records the identity)."""
        topic = self.shop.topics.purchases
        if count:
            stats = generate(self.shop.connection, topic, count, invalid_share=0.1, seed=seed)
            self.out.records += stats.produced + stats.aborted
        if self.identity() is None:
            made = self.cli(["create-topics", "--allow-existing"])
            code = self.finish(made, 120)
            if code != 0 or self.identity() is None:
                self.violate("create_topics_failed", f"create-topics --allow-existing exit {code}, identity "
                             f"{self.identity()}: {made.tail(2)!r}")
                return
            self.grown = False
            self.note("create-topics recorded the identity")
        admin = self.lab.admin

        def ends() -> dict:
            return {t: {p: o.high_watermark for p, o in admin.offsets(t, admin.partitions(t)).items()}
                    for t in (*self.shop.topics.outputs, self.shop.pipeline().checkpoint_topic)}

        before = (self.committed(), self.records(), ends())
        prefix = f"{self.shop.transactional_id_prefix}-second"
        job = self.run_job(["--transactional-id-prefix", prefix], route=route)
        code = self.finish(job)
        committed, records, written = self.committed(), self.records(), ends()
        errors = error_lines(job.stderr)
        bad = run_violations(code, job.stderr)
        if bad or code != 2:
            where = self.lab.keep_log(job, f"model-{self.seed}-step{self.step}")
            self.violate("other_prefix_not_refused", f"a run with prefix {prefix} on the pipeline's group: exit "
                         f"{code} {sorted(bad)}; log {where or 'not kept'}; {job.tail(3)!r}")
        elif "offsets reslot" not in errors[0]:
            self.violate("other_prefix_refused_unclearly", errors[0])
        self.note(f"second pipeline with prefix {prefix}: exit {code}: {(errors or ['-'])[0][:160]}")
        moved = {p: (before[0][p], c) for p, c in committed.items()
                 if c is not None and c != before[0].get(p)}  # expired meanwhile is no move
        if moved or records != before[1] or written != before[2]:
            self.violate("other_prefix_moved_something", f"group offsets {moved}, checkpoint records "
                         f"{'changed' if records != before[1] else 'as they were'}, topic ends "
                         f"{before[2]} -> {written}")

