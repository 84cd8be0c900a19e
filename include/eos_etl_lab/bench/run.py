"""Orchestrate one benchmark run: own broker, shared inputs, every case measured in its own process.

Layout under ``var/bench/`` (wiped at start): ``kafka/`` (the bench's broker,
never the dev broker in var/kafka), ``kafka-cluster/`` (the 3-node cluster of
the cluster comparison, started only for it), ``specs/`` and ``logs/`` per case run,
``payloads-*.pkl`` (pre-built output records for B1/B2/N) and
``results.json`` (raw rows, rewritten after every case so a crash keeps them).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eos_etl import paths
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG
from eos_etl.engine.slots import AS_COMMITTED, DEFAULT_WRITER_SLOTS
from eos_etl.host.ports import free_port
from eos_etl.jvm import class_data
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.jvm_training import SHOP_JVM_WORKLOAD
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings

from . import breakdown, partition_sweep
from .cluster_compare import ClusterComparison
from .harness import measure
from .machine import describe_machine, load_average
from .peers.comparison import run_peers
from .regimes import AFTER_PAUSE, BACK_TO_BACK
from .targets import KafkaTarget, stop_leftovers
from .verification import output_counts, verify

log = logging.getLogger(__name__)

# Java-client producer settings for B3 that mirror the engine's librdkafka defaults, but its linger: at least
# once, its records are readable as they are sent and it never commits; a long linger would only hold them.
SPARK_PRODUCER = {**{k: DEFAULT_PRODUCER_CONFIG[k] for k in ("acks", "batch.size", "compression.type")},
                  "linger.ms": 20}


#: Purchases per transaction of the window-end proof's inputs (unless ``--input-transaction-size``).
PROOF_INPUT_TRANSACTION = 1_000


@dataclass
class Options:
    records: int = 100_000
    partitions: int = 4
    repeats: int = 3
    sizes: list[int] = field(default_factory=lambda: [10_000, 100_000, 1_000_000])
    partition_counts: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    txn_sizes: list[int] = field(default_factory=lambda: [1, 100, 1_000, 10_000, 100_000])
    input_transaction_size: int | None = None  # the inputs' purchases per transaction (None: no transactions)
    proof_sizes: list[int] = field(default_factory=lambda: [100_000, 1_000_000])  # the window-end proof's windows
    only_end_proof: bool = False  # run nothing but the window-end proof's windows
    breakdown_size: int = 1_000_000  # the per-purchase breakdown's window (bench.breakdown)
    only_breakdown: bool = False  # run nothing but the per-purchase breakdown
    sweep_partitions: list[int] = field(default_factory=lambda: [4, 32, 128, 512, 1024])  # bench.partitions
    sweep_slots: list[int | None] = field(default_factory=lambda: [None, DEFAULT_WRITER_SLOTS])  # bench.partitions:
                                                                                                 # writer slots
    sweep_records: int = 200_000  # the partition sweep's full window
    sweep_small: int = 2_000  # its small window
    only_partitions: bool = False  # run nothing but the partition sweep
    only_peers: bool = False  # run nothing but the peers side by side (peers/comparison.py)
    sample: int = 500  # purchases for N (one transaction each)
    max_transactions: int = 500  # B2 uses at most this many transactions (k=1 -> 500 purchases)
    big_repeats: int | None = None  # S repetitions at sizes above `records` (default: repeats)
    big_b3_repeats: int = 1  # B3 repetitions at sizes above `records`
    scale_b3: bool = True
    out: Path = Path("docs")
    timeout_s: float = 3600.0
    quick: bool = False
    cluster_compare: bool = True  # S and B3 on the single node and on a 3-node cluster, interleaved
    cluster_size: int = 3
    only_cluster_compare: bool = False  # run nothing but the cluster comparison
    spark_connect: bool = True  # SC: S as a client of a long-lived Spark Connect server, beside S
    # Idle seconds before each ``SC after a pause`` window: Spark stops Python workers idle for a minute,
    # looking every 10 s (PythonWorkerFactory, not configurable), so after 80 s they are gone.
    idle_pause_s: float = 80.0


class Bench:
    def __init__(self, opts: Options):
        self.opts = opts
        self.work = paths.var_dir() / "bench"
        self.rows: list[dict] = []
        self.checks: list[dict] = []
        self.target: KafkaTarget | None = None  # the bench's single node: every case runs here unless told
        self.started = time.time()
        self.meta: dict = {}
        self.windows: dict[str, object] = {}  # group -> the window its run was given
        self.cluster_compare_meta: dict = {}  # the cluster comparison's set-up and timing (cluster_compare.py)
        self.connect = None  # the Spark Connect server SC runs on (started in run())

    # -- broker & inputs ------------------------------------------------------------------
    def start_broker(self) -> None:
        stop_leftovers(self.work)
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self.target = KafkaTarget.start("single", self.work / "kafka", size=1, heap="1g",
                                        jmx=self.opts.only_partitions,
                                        overrides=partition_sweep.BROKER if self.opts.only_partitions else None)

    def stop_broker(self) -> None:
        if self.target is not None:
            self.target.stop()

    def start_spark_connect(self, size: int | None = None, expected_purchases: int | None = None,
                            pc: int | None = None) -> None:
        """The long-lived server SC runs on, with the settings every Spark JVM here gets, and its first
        window (cold: the server's own start-up, paid once per server; ``size``, default the main window)
        run and recorded apart."""
        t0 = time.monotonic()
        self.connect = SparkConnectServer(home=self.work / "spark-connect", port=free_port()).start()
        self.meta["spark_connect_start_s"] = round(time.monotonic() - t0, 1)
        o = self.opts
        size, pc = size or o.records, pc or o.partitions
        row, settings = self.run_case("SC", size=size, pc=pc, rep=0, label="SC-first",
                                      record=False, keep_topics=True, expected_purchases=expected_purchases)
        self.meta["spark_connect_first_window"] = {k: row.get(k) for k in ("job_s", "wall_s", "cpu_s", "ok")}
        self.check_s(settings, size, pc, tags={"case": "SC"})
        self.drop_outputs(settings)

    def stop_spark_connect(self) -> None:
        if self.connect is not None:
            self.connect.stop()

    def prepare_inputs(self) -> None:
        o = self.opts
        counts = {o.partitions: max([*o.sizes, o.records])}
        for pc in o.partition_counts:
            counts.setdefault(pc, o.records)
        for pc, n in sorted(counts.items()):
            self.target.prepare_input(f"bench-purchases-p{pc}", pc, n, o.input_transaction_size)
        self.meta["inputs"] = dict(self.target.inputs)

    # -- one measured case ------------------------------------------------------------------
    def _settings(self, name: str, pc: int, target: KafkaTarget,
                  writer_slots: int | None | str = AS_COMMITTED) -> ShopSettings:
        topics = ShopTopics(purchases=target.inputs[pc]["topic"], invoices=f"bench-{name}-invoices",
                            shipments=f"bench-{name}-shipments", dead_letters=f"bench-{name}-dlq")
        return ShopSettings(connection=target.connection, topics=topics, group=f"bench-{name}",
                            transactional_id_prefix=f"bench-{name}", writer_slots=writer_slots)

    def _window(self, settings: ShopSettings, size: int, pc: int, target: KafkaTarget):
        cap = size // pc if size < target.inputs[pc]["count"] else None
        return settings.plan(max_records_per_partition=cap, for_run=True)

    def run_case(self, case: str, *, size: int, pc: int, rep: int, label: str | None = None,
                 extra: dict | None = None, keep_topics: bool = False, record: bool = True,
                 target: KafkaTarget | None = None, row_tags: dict | None = None,
                 expected_purchases: int | None = None, settings: ShopSettings | None = None
                 ) -> tuple[dict, ShopSettings]:
        """Run one case in its own process against ``target`` (default: the single node), verify, record.

        ``row_tags`` are extra fields stored with the row (the cluster comparison marks its rows so they are
        reported apart from the single-node tables). ``expected_purchases``: the window's purchases when its
        offset span holds commit markers too (a transactional input); default the span. ``settings``: run
        that pipeline again (its group, outputs and ids) instead of a new one."""
        target = target or self.target
        label = label or case
        name = (f"{label.lower().replace('(', '').replace(')', '').replace('=', '').replace(' ', '-')}-{size}-p{pc}"
                f"-r{rep}-{uuid.uuid4().hex[:6]}")
        if target is not self.target:
            name = f"{target.name}-{name}"
        rerun = settings is not None
        settings = settings or self._settings(name, pc, target, (extra or {}).get("writer_slots", AS_COMMITTED))
        t = settings.topics
        # Every case, a reading-only one too: planning reads the checkpoint topic and looks at the outputs.
        ensure_topics(target.admin, settings.specs(pc, outputs_only=True))
        window = self._window(settings, size, pc, target)
        self.windows[settings.group] = window
        before = output_counts(settings, target) if rerun else (0, 0, 0)
        spec = {
            "case": case,
            "connection": target.connection.to_json(),
            "input_topic": t.purchases,
            "window": window.to_json(),
            "group": settings.group,
            "prefix": settings.transactional_id_prefix,
            "topics": {"invoices": t.invoices, "shipments": t.shipments, "dead_letters": t.dead_letters},
            "run_id": name[-12:],
            "expected_purchases": expected_purchases or window.span,
            "spark_producer": SPARK_PRODUCER,
            **(extra or {}),
        }
        row, _ = self._measure(name, spec, target, label=label, size=size, pc=pc, rep=rep, **(row_tags or {}))
        row["window_purchases"] = expected_purchases or window.span
        row["problems"] = verify(case, row, settings, window, target, before) if row["ok"] else row["problems"]
        row["ok"] = not row["problems"]
        if row["problems"]:
            log.error("%s: verification failed: %s", name, row["problems"])
        if record:
            self.rows.append(row)
            self.save()
        if not keep_topics:
            self.drop_outputs(settings, target)
        return row, settings

    def _measure(self, name: str, spec: dict, target: KafkaTarget, **labels) -> tuple[dict, dict]:
        spec_path = self.work / "specs" / f"{name}.json"
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(json.dumps(spec))
        result_path = self.work / "specs" / f"{name}.result.json"
        env, also = None, ()
        if spec["case"] in ("SC", "SC-stage"):  # a client of the server: the work (and its CPU and memory) is the
                                                # server's
            env, also = {**os.environ, **self.connect.client_env()}, (self.connect.pid(),)
        broker_cpu0 = target.broker_cpu_seconds()
        load_before = os.getloadavg()[0]
        m = measure([sys.executable, "-m", "eos_etl_lab.bench.cases", str(spec_path), str(result_path)],
                    result_path=result_path, log_path=self.work / "logs" / f"{name}.log", timeout_s=self.opts.timeout_s,
                    env=env, also=also)
        broker_cpu1 = target.broker_cpu_seconds()
        res = m.result
        row = {
            **labels,
            "case": spec["case"],
            "name": name,
            "wall_s": m.wall_s,
            "job_s": res.get("job_s"),
            "startup_s": res.get("startup_s"),
            "cpu_s": m.cpu_s,
            "cpu_sampled_s": m.cpu_sampled_s,
            "cpu_rusage_s": m.cpu_rusage_s,
            "broker_cpu_s": round(broker_cpu1 - broker_cpu0, 3) if broker_cpu0 is not None and broker_cpu1 else None,
            "peak_rss_mb": m.peak_rss_mb,
            # 1-minute load average before and after: the machine is shared, this shows how busy it was.
            "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "purchases": res.get("purchases"),
            "outputs": res.get("outputs"),
            "transactions": res.get("transactions"),
            "result": {k: v for k, v in res.items() if k not in ("job_s", "startup_s", "purchases", "outputs")},
            "log": m.log_path,
            "ok": m.ok,
            "problems": [] if m.ok else [f"exit code {m.returncode}, see {m.log_path}"],
        }
        log.info("%s: wall %.1fs job %ss cpu %.1fs peak %.0f MB purchases %s outputs %s%s", name, m.wall_s,
                 row["job_s"], m.cpu_s, m.peak_rss_mb, row["purchases"], row["outputs"],
                 "" if m.ok else f" FAILED ({m.log_path})")
        return row, res

    def check_s(self, settings: ShopSettings, size: int, pc: int, target: KafkaTarget | None = None,
                tags: dict | None = None, window_ends: bool = True) -> dict:
        """The independent checker over an S run's topics (in its own process). ``window_ends``: the committed
        offsets must be the window's ends (a peer commits its last record's offset + 1 instead, short of a
        commit marker that ends a range: then every committed input is still judged)."""
        target = target or self.target
        window = self.windows[settings.group]
        t = settings.topics
        spec = {"case": "check", "connection": target.connection.to_json(), "input_topic": t.purchases,
                "window": window.to_json(), "group": settings.group, "prefix": settings.transactional_id_prefix,
                "topics": {"invoices": t.invoices, "shipments": t.shipments, "dead_letters": t.dead_letters},
                "window_ends": window_ends}
        row, res = self._measure(f"check-{settings.group}", spec, target, label="check", size=size, pc=pc, rep=0)
        entry = {"size": size, "partitions": pc, "ok": bool(res.get("ok")), "violations": res.get("violations"),
                 "committed_inputs": res.get("purchases"), "outputs": res.get("outputs"), "seconds": row["wall_s"],
                 "log": row["log"], **(tags or {})}
        log.info("checker %s p%d: ok=%s violations=%s", size, pc, entry["ok"], entry["violations"])
        self.checks.append(entry)
        self.save()
        return entry

    def drop_outputs(self, settings: ShopSettings, target: KafkaTarget | None = None) -> None:
        t = settings.topics
        try:
            (target or self.target).admin.delete_topics([t.invoices, t.shipments, t.dead_letters,
                                                          settings.pipeline().checkpoint_topic])
        except Exception as exc:  # noqa: BLE001 - a leftover topic only costs disk
            log.warning("could not delete %s's topics: %s", settings.group, exc)

    # -- the plan --------------------------------------------------------------------------------
    def payloads_path(self) -> Path:
        return self.work / f"payloads-{self.opts.records}-p{self.opts.partitions}.pkl"

    def prepare_payloads(self) -> None:
        """A warm-up S run (not counted): its outputs become B1/B2/N's payloads; the checker judges it."""
        o = self.opts
        row, settings = self.run_case("S", size=o.records, pc=o.partitions, rep=0, label="S-warmup",
                                      keep_topics=True, record=False)
        if not row["ok"]:
            raise RuntimeError(f"warm-up S run failed: {row['problems']}")
        self.check_s(settings, o.records, o.partitions)
        t = settings.topics
        spec = {"case": "payloads", "connection": self.target.connection.to_json(),
                "payloads": str(self.payloads_path()),
                "topics": {"invoices": t.invoices, "shipments": t.shipments, "dead_letters": t.dead_letters}}
        prow, res = self._measure(f"payloads-{settings.group}", spec, self.target, label="payloads", size=o.records,
                                  pc=o.partitions, rep=0)
        if res.get("purchases") != o.records:
            raise RuntimeError(f"payload collection got {res.get('purchases')} purchases, want {o.records}")
        self.drop_outputs(settings)

    def main_cases(self) -> list[tuple[str, str, dict]]:
        o = self.opts
        payloads = {"payloads": str(self.payloads_path())}
        cases: list[tuple[str, str, dict]] = [("B1", "B1", payloads)]
        for k in o.txn_sizes:
            limit = min(o.records, k * o.max_transactions)
            cases.append(("B2", f"B2(k={k})", {**payloads, "txn_size": k,
                                                "limit": limit if limit < o.records else None}))
        cases += [("B3", "B3", {}), ("S", "S", {}), *([("SC", "SC", {})] if o.spark_connect else []),
                  ("N", "N", {**payloads, "limit": o.sample}), ("R", "R", {})]
        return cases

    def run_main(self) -> None:
        o = self.opts
        for rep in range(1, o.repeats + 1):
            for case, label, extra in self.main_cases():
                self.run_case(case, size=o.records, pc=o.partitions, rep=rep, label=label, extra=extra)

    def run_scale(self) -> None:
        o = self.opts
        for size in o.sizes:
            if size == o.records:
                continue  # the main table has it
            reps = o.repeats if size <= o.records or o.big_repeats is None else o.big_repeats
            for rep in range(1, reps + 1):
                for case in ("S", "SC") if o.spark_connect else ("S",):
                    _row, settings = self.run_case(case, size=size, pc=o.partitions, rep=rep, keep_topics=rep == 1)
                    if rep == 1:
                        self.check_s(settings, size, o.partitions, tags={"case": case})
                        self.drop_outputs(settings)
                if o.scale_b3 and (size <= o.records or rep <= o.big_b3_repeats):
                    self.run_case("B3", size=size, pc=o.partitions, rep=rep)
        for pc in o.partition_counts:
            if pc == o.partitions:
                continue
            for rep in range(1, o.repeats + 1):
                _row, settings = self.run_case("S", size=o.records, pc=pc, rep=rep, keep_topics=rep == 1)
                if rep == 1:
                    self.check_s(settings, o.records, pc)
                    self.drop_outputs(settings)

    def run_regimes(self) -> None:
        """The default route's fixed cost in the two regimes its windows run in (:mod:`.regimes`), apart.

        Back to back (a backlog, a backfill, windows less than a minute apart): every scale size, each SC
        window straight after another one, the server's Python workers kept (rows ``SC back-to-back``).
        After a pause (a schedule minutes apart): the smallest size, each window after
        :attr:`Options.idle_pause_s` with nothing running, so Spark forks the workers again
        (rows ``SC after a pause``). Each row holds the server's Python workers as its window started."""
        o = self.opts
        smallest = min(o.sizes)
        self.run_case("SC", size=smallest, pc=o.partitions, rep=0, record=False)  # the workers up
        for rep in range(1, o.repeats + 1):
            for size in o.sizes:
                self.run_case("SC", size=size, pc=o.partitions, rep=rep, label=BACK_TO_BACK, row_tags=self._workers())
        for rep in range(1, o.repeats + 1):
            time.sleep(o.idle_pause_s)
            self.run_case("SC", size=smallest, pc=o.partitions, rep=rep, label=AFTER_PAUSE, row_tags=self._workers())

    def _workers(self) -> dict:
        """The server's Python workers as a window starts (which regime it really ran in), a row tag."""
        return {"python_workers_before": self.connect.python_workers()}

    def run_end_proof(self) -> None:
        """What the window-end proof costs: S and SC windows over the whole of a transactional input of each
        size (a commit marker after every partition's last purchase), so every task proves its window end
        by reading past its last record; rows labelled ``S proof`` and ``SC proof``."""
        o = self.opts
        for size in o.proof_sizes:
            self.target.prepare_input(f"bench-proof-{size}-p{o.partitions}", o.partitions, size,
                                      o.input_transaction_size or PROOF_INPUT_TRANSACTION)
            if o.spark_connect and self.connect is None:  # --only end-proof: started on the first input
                self.start_spark_connect(size, expected_purchases=size)
            for rep in range(1, o.repeats + 1):
                for case in ("S", "SC") if o.spark_connect else ("S",):
                    self.run_case(case, size=size, pc=o.partitions, rep=rep, label=f"{case} proof",
                                  expected_purchases=size)
        self.target.inputs.pop(o.partitions, None)  # the main input's entry is gone with the prefix topics

    def run_breakdown(self) -> None:
        """Where a purchase's time goes on the default route: the stages of :mod:`.breakdown`, one after
        the other in each repetition, over one window on one Spark Connect server; rows labelled
        ``SC <stage>``, tagged ``stage``."""
        o = self.opts
        size = o.breakdown_size
        self.target.prepare_input(f"bench-breakdown-{size}-p{o.partitions}", o.partitions, size,
                                  o.input_transaction_size)
        if self.connect is None:
            self.start_spark_connect(size)
        for rep in range(1, o.repeats + 1):
            for stage in breakdown.STAGES:
                case = "SC" if stage == "publish" else "SC-stage"
                self.run_case(case, size=size, pc=o.partitions, rep=rep, label=f"SC {stage}",
                              extra={"stage": stage}, row_tags={"stage": stage})
        self.target.inputs.pop(o.partitions, None)

    def save(self) -> None:
        data = {"options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self.opts).items()},
                "meta": self.meta, "started": self.started, "elapsed_s": round(time.time() - self.started, 1),
                "rows": self.rows, "checks": self.checks}
        if self.cluster_compare_meta:
            data["cluster_compare"] = self.cluster_compare_meta
        (self.work / "results.json").write_text(json.dumps(data, indent=1))

    def run(self) -> dict:
        # As make setup leaves a machine: every Spark JVM maps the class-data archive (a no-op if built).
        class_data.build(SHOP_JVM_WORKLOAD)
        self.meta["machine_start"] = describe_machine()
        self.start_broker()
        try:
            if self.opts.only_breakdown:
                self.run_breakdown()
            elif self.opts.only_partitions:
                partition_sweep.run(self)
            elif self.opts.only_peers:
                run_peers(self)
            elif self.opts.only_end_proof:
                self.run_end_proof()
            elif not self.opts.only_cluster_compare:
                t0 = time.monotonic()
                self.prepare_inputs()
                self.meta["prepare_inputs_s"] = round(time.monotonic() - t0, 1)
                self.prepare_payloads()
                if self.opts.spark_connect:
                    self.start_spark_connect()
                self.run_main()
                self.run_scale()
                if self.opts.spark_connect:
                    self.run_regimes()
                self.run_end_proof()
                self.stop_spark_connect()
            single = (self.opts.only_end_proof or self.opts.only_breakdown or self.opts.only_partitions
                      or self.opts.only_peers)
            if (self.opts.cluster_compare and not single) or self.opts.only_cluster_compare:
                ClusterComparison(self, SPARK_PRODUCER).run()
        finally:
            self.save()
            self.stop_spark_connect()
            self.stop_broker()
        self.meta["load_end"] = load_average()
        self.save()
        return json.loads((self.work / "results.json").read_text())
