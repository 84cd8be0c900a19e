"""Where fault scenarios run: a real broker, fresh topics per trial, the verdict.

A :class:`Lab` wraps one broker (PLAINTEXT plus a SASL_SSL/SCRAM listener). The
soak command starts a private broker for it, so it can hard-kill and restart
the broker without touching anyone else's; the test suite builds one around
the session broker. Every trial gets its own topics, group and transactional
id prefix, and is judged the same way: the independent checker reports zero
violations and no output partition is left with a hanging transaction
(last stable offset below the high watermark).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from eos_etl.checker import check_shop
from eos_etl.engine import slots
from eos_etl.engine.planning.planner import with_committed_grouping
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings

from .job_process import JobProcess, run_window_args

log = logging.getLogger(__name__)


@dataclass
class TrialResult:
    """One trial of one scenario, as the results table reports it."""

    scenario: str
    trial: str
    records: int = 0  # purchases written to the input topic
    kills: int = 0  # faults that landed: job processes killed or paused, broker kills
    violations: dict = field(default_factory=dict)
    lso_settled: bool = True
    seconds: float = 0.0
    detail: str = ""
    error: str = ""  # the trial itself could not be carried out
    # From the first fault to the faulted run finishing, or else to the next run finishing (None: not measured).
    recovery_s: float | None = None
    # A run neither finished nor failed within the bound the scenario states (it was killed).
    hung: bool = False
    # Exit code of the faulted run, where the scenario judges it (start-phase kills); None: not judged.
    exit_code: int | None = None
    # From the fault to the faulted run ending (or what the scenario times: an orphan's tasks ending).
    fail_s: float | None = None
    # What the trial ran against, when a soak runs the same scenario on several set-ups
    # (e.g. "transaction.version=1"); "" for one set-up.
    variant: str = ""
    # Things the trial saw happen, counted (e.g. producers re-initialised after an unknown outcome).
    counters: dict = field(default_factory=dict)

    @property
    def violation_count(self) -> int:
        return sum(self.violations.values()) + (0 if self.lso_settled else 1) + int(self.hung)

    @property
    def ok(self) -> bool:
        return not self.error and self.violation_count == 0

    @classmethod
    def from_dict(cls, data: dict) -> "TrialResult":
        """Back from :meth:`to_dict` (a soak's results.json)."""
        return cls(**{k: v for k, v in data.items() if k != "ok"})

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "trial": self.trial, "records": self.records, "kills": self.kills,
                "violations": self.violations, "lso_settled": self.lso_settled, "seconds": self.seconds,
                "detail": self.detail, "error": self.error, "recovery_s": self.recovery_s, "hung": self.hung,
                "exit_code": self.exit_code, "fail_s": self.fail_s, "variant": self.variant,
                "counters": self.counters, "ok": self.ok}


#: The writer slots of the lab's and the tests' shops when a scenario names none: unset, the product's default
#: (as committed: a new shop gets slots.DEFAULT_WRITER_SLOTS); N, N slots; per-partition, one transactional id
#: per input partition: to run the fault scenarios and kill tests on another grouping.
LAB_WRITER_SLOTS_ENV = "EOS_ETL_LAB_WRITER_SLOTS"


def lab_writer_slots() -> int | None | str:
    return slots.parse(os.environ.get(LAB_WRITER_SLOTS_ENV, "").strip() or None)


def transactional_id(shop: ShopSettings, partition: int) -> str:
    """The transactional id that publishes ``partition`` of ``shop``'s input: its writer slot's, in the
    grouping its positions name (a new shop's: the default), as a run's plan would decide it."""
    return with_committed_grouping(ClusterAdmin(shop.connection), shop.pipeline()).transactional_id(partition)


@dataclass
class Lab:
    connection: KafkaConnection
    broker: object | None = None  # eos_etl.embedded.kafka_cluster.KafkaCluster when the scenario may kill it
    sasl_bootstrap_servers: str | None = None
    sasl_user: str | None = None
    sasl_password: str | None = None
    sasl_ca_file: object | None = None  # the CA certificate of the SASL_SSL listener
    # Where the logs of jobs that failed or hung are kept (None: not kept).
    log_dir: object | None = None
    # embedded.spark_cluster.SparkStandalone for the Spark-side scenarios (None: jobs run Spark in local mode).
    spark: object | None = None
    # faults.network_lab.NetworkLab when jobs run on hosts of their own (network namespaces), to be cut off.
    network: object | None = None
    # embedded.spark_connect.SparkConnectServer for the Connect scenarios (None: jobs run their own Spark).
    connect: object | None = None

    @property
    def cluster(self):
        """The lab's multi-node :class:`~eos_etl.embedded.kafka_cluster.KafkaCluster` (cluster scenarios need one)."""
        if self.broker is None or getattr(self.broker, "size", 1) < 3:
            raise ValueError("this scenario needs a lab that owns a Kafka cluster of at least 3 nodes")
        return self.broker

    @property
    def admin(self) -> ClusterAdmin:
        # A fresh client each time: one that lived through a broker SIGKILL can hang.
        return ClusterAdmin(self.connection)

    def make_shop(self, partitions: int = 2, *, name: str = "soak", **kwargs) -> ShopSettings:
        """A shop of fresh topics, group and transactional-id prefix; its writer slots are
        ``$EOS_ETL_LAB_WRITER_SLOTS`` unless given (:func:`lab_writer_slots`)."""
        kwargs.setdefault("writer_slots", lab_writer_slots())
        tag = f"{name}-{uuid.uuid4().hex[:8]}"
        topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}",
                            shipments=f"shipments-{tag}", dead_letters=f"purchases-{tag}.dlq")
        shop = ShopSettings(connection=self.connection, topics=topics, group=f"group-{tag}",
                            transactional_id_prefix=f"txn-{tag}", **kwargs)
        ensure_topics(self.admin, shop.specs(partitions), allow_existing=True)
        return shop

    def input_ends(self, shop: ShopSettings, timeout_s: float = 60) -> dict[int, int]:
        """Where a complete run must leave the group's offsets: each input partition's LSO, once settled.

        The writer's last commit returns when the coordinator has decided; its
        markers reach the partitions a moment later (longer with replicas to
        wait for), and until then the LSO is short of the end. Every input
        transaction is decided by the time this is called, so wait for LSO = high
        watermark rather than take a stale end.
        """
        offsets = self.admin.settled_offsets(shop.topics.purchases, timeout_s=timeout_s, poll_s=0.2)
        return {p: o.last_stable for p, o in offsets.items()}

    def job(self, shop: ShopSettings, extra: list[str] = (), *, failpoints: str = "", env: dict | None = None,
            host: str = "job") -> JobProcess:
        """A run of the window; with a network lab, on its job ``host``."""
        args = run_window_args(shop, list(extra))
        if self.network is not None:
            args = self.network.job_command(args, host)
            env = {**self.network.job_env(), **(env or {})}
        return JobProcess(args, failpoints=failpoints, env=env)

    def keep_log(self, job: JobProcess, name: str) -> str:
        """Save a job's output for diagnosis; returns where (or '')."""
        if self.log_dir is None:
            return ""
        path = Path(self.log_dir) / f"{name}-{job.pid}.log"
        job.save(path)
        return str(path)

    def recover(self, shop: ShopSettings, extra: list[str] = (), *, timeout_s: float = 600,
                env: dict | None = None) -> JobProcess:
        """Run the job to completion with no faults (what the next scheduled run does)."""
        job = self.job(shop, extra, env=env).start()
        code = job.wait(timeout_s)
        if code != 0:
            job.kill()
            where = self.keep_log(job, "recovery-failed")
            raise RecoveryFailed(f"recovery run exited with {code} (log: {where or 'not kept'}):\n{job.tail(25)}")
        return job

    def wait_for_expired_offsets(self, shop: ShopSettings, timeout_s: float = 180) -> float:
        """Wait until the broker deleted the group's committed offsets (its offsets retention ran out
        since the last commit); return how long that took. Raises TimeoutError past ``timeout_s``."""
        t0 = time.monotonic()
        parts = self.admin.partitions(shop.topics.purchases)
        with GroupOffsetsReader(self.connection.client_config(), shop.group) as reader:
            while True:
                left = {p: o for p, o in reader.unstable(shop.topics.purchases, parts, 10).items() if o is not None}
                if not left:
                    return time.monotonic() - t0
                if time.monotonic() - t0 > timeout_s:
                    raise TimeoutError(f"group {shop.group} still has committed offsets {left} after {timeout_s:.0f}s")
                time.sleep(2)

    def outputs_settled(self, shop: ShopSettings, timeout_s: float = 60) -> bool:
        """No transaction left hanging: every output partition's LSO reaches its high watermark (and
        every partition of the checkpoint topic, written in the same transactions)."""
        deadline = time.monotonic() + timeout_s
        admin = self.admin
        lagging = [(t, p) for t in (*shop.topics.outputs, shop.pipeline().checkpoint_topic)
                   for p, o in admin.settled_offsets(t, timeout_s=max(0.0, deadline - time.monotonic()),
                                                     poll_s=0.5).items() if not o.settled]
        if lagging:
            log.error("output partitions with a hanging transaction: %s", lagging)
        return not lagging

    def judge_before_retry(self, result: TrialResult, shop: ShopSettings, settle_s: float) -> TrialResult:
        """The checker with no further run before it (a later run must not be able to hide a loss):
        every committed input has its outputs, while the committed offsets may be short of the
        input's ends (an interrupted attempt commits no more). Its counts go to ``result.counters``,
        its violations, named ``<kind>_before_retry``, to ``result.violations``.

        First the outputs must settle, within ``settle_s``: an attempt destroyed mid-transaction
        leaves it open until the broker aborts it (its transaction timeout), and until then a
        read_committed reader sees none of the outputs committed after it began, on any partition."""
        t0 = time.monotonic()
        if not self.outputs_settled(shop, timeout_s=settle_s):
            result.violations["unsettled_before_retry"] = 1
        result.counters["settled_before_retry_s"] = round(time.monotonic() - t0, 1)
        report = check_shop(shop, expected_ends=None)
        parts = report.partitions.values()
        result.counters.update(committed_before_retry=sum(p.committed_inputs for p in parts),
                               published_before_retry=sum(p.covered_inputs for p in parts),
                               lost_before_retry=report.violations.get("lost", 0),
                               committed_offsets_before_retry={p.partition: p.committed_offset for p in parts})
        result.violations.update({f"{kind}_before_retry": n for kind, n in report.violations.items()})
        if not report.ok:
            log.error("trial %s/%s before any retry: violations %s", result.scenario, result.trial,
                      dict(report.violations))
        return result

    def judge(self, result: TrialResult, shop: ShopSettings, expected_ends: dict[int, int] | None = None
              ) -> TrialResult:
        """Fill in the verdict: checker violations and whether outputs settled."""
        result.lso_settled = self.outputs_settled(shop)
        report = check_shop(shop, expected_ends=expected_ends if expected_ends is not None else self.input_ends(shop))
        # Merged: scenario-specific violations found before the verdict stay counted.
        result.violations = {**result.violations, **report.violations}
        if not report.ok:
            log.error("trial %s/%s: violations %s", result.scenario, result.trial, report.to_dict())
        return result


class RecoveryFailed(RuntimeError):
    pass
