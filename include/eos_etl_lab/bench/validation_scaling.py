"""What data-quality validation costs next to the window it checks, on the default route.

``python -m eos_etl_lab bench --only validation-scaling`` runs against its own
single-node Kafka and its own Spark Connect server (both under
``var/bench-validation/``): the default route, where every window and its
validation are clients of one long-lived Spark application, as under ``make up``.

* size: for each of ``sizes`` purchases in one window, side by side on the same
  server:

  - ``run_window``: the window's run as the DAG's ``run_window`` task runs it (a
    ``python -m eos_etl run-window`` client process, timed from its start to its end), best
    of ``repeats`` windows of the size, each validated by the task below;
  - ``validate``: validation as the DAG's ``validate`` task runs it on this route (a
    fresh client process: imports, a session on the server, ``validate_window``, timed
    from its start to its result; best of ``repeats``, one per window, so the ratio compares
    best with best), and ``validate_window``'s own seconds in this
    process (best of ``repeats``, the Great Expectations project already open),
    with Great Expectations' share (its counts and Checkpoint steps) and the jobs the server ran for it;
  - the read floor: only reading what the checks must read (the window's inputs and the
    output span validation read, one count each, on the server), in this process and
    as a fresh client process (imports and session included): no validation on this
    route costs less;
  - the before column, up to ``before_max`` purchases: validation as the validate task did
    it before it ran where the window ran, in a process of its own with a fresh
    ``local[2]`` Spark application (JVM start included), with the code at
    ``before_code`` (an ``include`` directory of another checkout; default this one);
  - peak RSS during validation (``VmHWM``, reset through ``/proc/<pid>/clear_refs``) of the
    server's JVM (the Spark driver and its local executors) and of the validating client.

* history: equal windows of ``window_records`` purchases are run one after the
  other on the same topics; the window after 1 earlier window and the window
  after ``history`` earlier windows are validated in this process (best of
  ``repeats``). The ratio is the figure (target <= 1.2): validation reads the
  input window and the output topics from the window's earliest input time minus
  the clock-skew margin on, so earlier windows cost nothing once they are older
  than the margin. The bench makes its history in minutes, so ``margin_ms``
  (default :data:`eos_etl.quality.window_reads.CLOCK_SKEW_MARGIN_MS`) is usually set
  lower to stand for a history older than the margin; the output offsets read
  (``span``) are reported with each figure. Before the second measurement the Great
  Expectations project is also given ``ge_history`` earlier validation results per
  suite (copies, dated before the window), standing for months of hourly runs.

Results go to ``<out>/validation_scaling.json``; a table is printed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import functions as F

from eos_etl import paths
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine.tasks.kafka_source import read_window
from eos_etl.host.ports import free_port
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import ensure_topics
from eos_etl.quality import validate_window
from eos_etl.quality.window_reads import CLOCK_SKEW_MARGIN_MS, read_outputs
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl.spark.session import spark_session, stop_session

from .server_jobs import server_jobs
from .targets import KafkaTarget, stop_leftovers

log = logging.getLogger(__name__)

HISTORY_RATIO_TARGET = 1.2
#: validate <= this x run_window, for windows up to the size (and beyond the last: the last).
VALIDATE_VS_RUN_TARGETS = ((100_000, 1.0), (None, 0.7))
TASK_TIMEOUT_S = 1800


def validate_vs_run_target(records: int) -> float:
    for upto, target in VALIDATE_VS_RUN_TARGETS:
        if upto is None or records <= upto:
            return target
    raise AssertionError("unreachable")


@dataclass
class ScalingOptions:
    window_records: int = 2_000  # purchases per window of the history phase
    history: int = 20  # earlier windows before the last measured one
    sizes: list[int] = field(default_factory=lambda: [20_000, 100_000, 1_000_000])  # purchases per window
    partitions: int = 4
    repeats: int = 2  # in-process validations per measured window; the fastest counts
    ge_history: int = 2_000  # earlier GE validation results per suite before the second history figure
    margin_ms: int = CLOCK_SKEW_MARGIN_MS
    before_max: int = 100_000  # the before column (fresh local Spark) for windows up to this size
    before_code: Path | None = None  # the `include` directory whose validation is the before column
    out: Path = Path("docs")


#: The fresh processes the bench times, run by file path (see their docstrings).
VALIDATE_TASK = Path(__file__).with_name("validate_task.py")
READ_FLOOR_TASK = Path(__file__).with_name("read_floor_task.py")


def shop_settings(spec: dict) -> ShopSettings:
    return ShopSettings(connection=KafkaConnection(spec["bootstrap_servers"]), topics=ShopTopics(**spec["topics"]),
                        group=spec["group"], transactional_id_prefix=spec["group"])


class _Shop:
    """Fresh shop topics on the bench broker, and the steps the bench times."""

    def __init__(self, target: KafkaTarget, partitions: int, gx_root: Path):
        name = f"vs-{uuid.uuid4().hex[:8]}"
        topics = ShopTopics(purchases=f"{name}-purchases", invoices=f"{name}-invoices",
                            shipments=f"{name}-shipments", dead_letters=f"{name}-dlq")
        self.settings = ShopSettings(connection=target.connection, topics=topics, group=name,
                                     transactional_id_prefix=name)
        ensure_topics(target.admin, self.settings.specs(partitions))
        self.gx_root = gx_root

    @property
    def app_name(self) -> str:
        """The run's application name: its windows and their validation share its session on the server."""
        return f"eos-etl-{self.settings.topics.purchases}"

    def spec(self, window, **extra) -> dict:
        t = self.settings.topics
        return {"bootstrap_servers": self.settings.connection.bootstrap_servers, "group": self.settings.group,
                "topics": {"purchases": t.purchases, "invoices": t.invoices, "shipments": t.shipments,
                           "dead_letters": t.dead_letters},
                "window": window.to_dict(), "gx": str(self.gx_root), "app_name": self.app_name, **extra}

    def add_window(self, records: int, seed: int):
        generate(self.settings.connection, self.settings.topics.purchases, records, invalid_share=0.05, seed=seed)
        return self.settings.plan()

    def run_window(self, spark, records: int, seed: int):
        """A window run in this process (the history phase)."""
        window = self.add_window(records, seed)
        t0 = time.monotonic()
        summary = run_shop_window(spark, self.settings, window)
        return window, summary, time.monotonic() - t0

    def run_window_task(self, env: dict, records: int, seed: int):
        """A window run as the DAG's run_window task runs it on this route: a client process."""
        window = self.add_window(records, seed)
        run_id = f"bench-{uuid.uuid4().hex[:8]}"
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers",
             self.settings.connection.bootstrap_servers, *self.settings.to_args(),
             "--window-json", window.to_json(), "--run-id", run_id, "--compact"],
            capture_output=True, text=True, timeout=TASK_TIMEOUT_S, env=env)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"run-window failed ({proc.returncode}): {proc.stderr[-3000:]}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        return window, summary, seconds

    def validate(self, spark, window, run_id: str, margin_ms: int, server=None):
        before = server_jobs(server) if server is not None else None
        result = validate_window(spark, self.settings, window, run_id=run_id, context_root=self.gx_root,
                                 clock_skew_margin_ms=margin_ms)
        if not result.success:
            raise RuntimeError(f"validation of a clean run failed: {[r.message for r in result.failures]}")
        return result, (server_jobs(server, before) if server is not None else None)


def _task(script: Path, spec: dict, env: dict) -> dict:
    proc = subprocess.run([sys.executable, str(script), json.dumps(spec)], capture_output=True, text=True,
                          timeout=TASK_TIMEOUT_S, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench task failed ({proc.returncode}): {proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out.get("success") is False:
        raise RuntimeError(f"validation of a clean run failed: {out['failures']}")
    return out


#: The steps of a validation that are Great Expectations' own (the rest reads the window's assets).
GE_STEPS = ("counts", "checkpoint", "summary")


def _best_validation(shop: _Shop, spark, window, run_id: str, opts: ScalingOptions, server=None) -> dict:
    results = [shop.validate(spark, window, f"{run_id}-{i}", opts.margin_ms, server) for i in range(opts.repeats)]
    best, jobs = min(results, key=lambda r: r[0].seconds)
    ge = round(sum(best.timings.get(step, 0.0) for step in GE_STEPS), 3)
    return {"validate_s": best.seconds, "all_s": [r.seconds for r, _ in results],
            "ge_s": ge, "ge_share": round(ge / best.seconds, 3) if best.seconds else None, "server_jobs": jobs,
            "output_span": best.output_read["span"], "output_read": best.output_read,
            "inputs": best.counts()["committed_inputs"], "spark": best.spark, "timings": best.timings}


def seed_ge_history(gx_root: Path, copies: int) -> int:
    """Copy each suite's newest validation result ``copies`` times, dated a day apart before it,
    into the GE project's validations store; the number of files written."""
    store = gx_root / "gx" / "uncommitted" / "validations"
    newest: dict[Path, Path] = {}
    for result in store.rglob("*.json"):
        suite_dir = result.parent.parent.parent  # <suite>/<run name>/<run time>/<batch>.json
        if suite_dir not in newest or result.parent.name > newest[suite_dir].parent.name:
            newest[suite_dir] = result
    written = 0
    for suite_dir, result in newest.items():
        for i in range(copies):
            run_time = f"2020{1 + i // 28 % 12:02d}{1 + i % 28:02d}T{i // 336 % 24:02d}0000.{i:06d}Z"
            target = suite_dir / f"history-{i:06d}" / run_time / result.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result, target)
            written += 1
    return written


def history_phase(target: KafkaTarget, spark, opts: ScalingOptions, work: Path) -> dict:
    """Validation of a window after 1 vs after ``history`` equal earlier windows."""
    shop = _Shop(target, opts.partitions, work / "gx-history")
    out: dict = {"window_records": opts.window_records, "history": opts.history, "margin_ms": opts.margin_ms,
                 "ge_history": opts.ge_history}
    seed = 0
    for earlier, key in ((1, "after_1"), (opts.history, f"after_{opts.history}")):
        while seed < earlier:
            shop.run_window(spark, opts.window_records, seed)
            seed += 1
        window, summary, run_s = shop.run_window(spark, opts.window_records, seed)
        seed += 1
        if earlier == opts.history and opts.ge_history:
            out["ge_history_results"] = seed_ge_history(shop.gx_root, opts.ge_history)
        out[key] = {**_best_validation(shop, spark, window, summary.run_id, opts), "run_window_s": round(run_s, 3)}
        log.info("validation after %d earlier window(s): %s", earlier, out[key])
    out["ratio"] = round(out[f"after_{opts.history}"]["validate_s"] / out["after_1"]["validate_s"], 3)
    out["ok"] = out["ratio"] <= HISTORY_RATIO_TARGET
    return out


def _hwm_kb(pid: int | str = "self") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm(pid: int | str = "self") -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak RSS to the current RSS
    except OSError:
        log.warning("cannot reset the peak RSS of process %s; the figure is the process lifetime's peak", pid)


def read_floor(spark, settings, window, output_read: dict, *, contract: bool = True) -> dict:
    """Seconds to only count what the checks must read, one Spark job each and no parsing: the
    window's inputs and the output span validation read (``output_read``, from its result), both
    read_committed. No validation can cost less than reading these. Beside it, the contract floor:
    the inputs counted by the shop contract's verdict (the transform's own classification, which the
    check "invoices = valid inputs" needs) and the outputs counted. No validation that classifies
    every input can cost less than that."""
    starts = {t: {int(p): o for p, o in parts.items()} for t, parts in output_read["from_offsets"].items()}
    reads = {"inputs": lambda: read_window(spark, settings.pipeline(), window),
             "outputs": lambda: read_outputs(spark, settings.connection, starts)}
    out: dict = {}
    for name, df in reads.items():
        t0 = time.monotonic()
        out[f"{name}_records"] = df().count()
        out[f"{name}_s"] = round(time.monotonic() - t0, 3)
    out["total_s"] = round(out["inputs_s"] + out["outputs_s"], 3)
    if not contract:
        return out
    t0 = time.monotonic()
    # An aggregate, not a filter: a filter on the verdict would be pushed into the contract's parse.
    out["inputs_valid"] = settings.reject_reasons()(reads["inputs"]()).agg(
        F.count_if(F.col("_reason").isNull())).first()[0]
    out["inputs_classified_s"] = round(time.monotonic() - t0, 3)
    out["contract_floor_s"] = round(out["inputs_classified_s"] + out["outputs_s"], 3)
    return out


def _before_column(shop: _Shop, window, run_id: str, run_s: float, opts: ScalingOptions, work: Path,
                   records: int) -> dict:
    """The validate task as it was (the before code, a fresh ``local[2]`` application); a failure is a
    result too (the code before ran out of memory at 1,000,000 purchases): recorded, not raised."""
    code = str(opts.before_code or "this checkout")
    try:
        before = _task(VALIDATE_TASK, shop.spec(window, run_id=f"{run_id}-before", margin_ms=opts.margin_ms,
                                                 master="local[2]", gx=str(work / f"gx-before-{records}")),
                       _before_env(opts))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        reasons = [line.strip() for line in str(exc).splitlines() if "Error" in line or "Exception" in line]
        log.warning("the before column failed at %d purchases: %s", records, reasons[:3])
        return {"failed": (reasons or [str(exc).splitlines()[0]])[-1][:300], "code": code}
    return {"task_s": before["task_s"], "validate_s": before["validate_s"],
            "ge_s": before["timings"].get("great_expectations"), "timings": before["timings"],
            "vs_run": round(before["task_s"] / run_s, 3), "code": code}


def _before_env(opts: ScalingOptions) -> dict:
    """The environment of the before column's process: no Connect server, the chosen code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    if opts.before_code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(opts.before_code), *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("EOS_ETL_HOME", str(paths.project_root()))
        env.setdefault("EOS_ETL_CACHE", str(paths.cache_dir()))
    return env


def size_phase(target: KafkaTarget, server: SparkConnectServer, spark, opts: ScalingOptions, work: Path,
               records: int) -> dict:
    """One window size: run_window, validate (task and in-process), read floor, before column, memory."""
    shop = _Shop(target, opts.partitions, work / f"gx-size-{records}")
    client_env = {**os.environ, **server.client_env()}
    # Best of ``repeats`` for both sides of the ratio: as many windows of this size, each run by a
    # run-window process and then validated by the validate task as the DAG runs it on this route (a
    # fresh client process, the Great Expectations project on disk as every window after the first
    # finds it). A window publishes once, so the run's repeats are windows of their own.
    runs, tasks = [], []
    for i in range(opts.repeats):
        window_i, summary_i, run_s_i = shop.run_window_task(client_env, records, seed=records + i)
        task_i = _task(VALIDATE_TASK, shop.spec(window_i, run_id=f"{summary_i['run_id']}-task",
                                                margin_ms=opts.margin_ms), client_env)
        runs.append((run_s_i, window_i, summary_i))
        tasks.append(task_i)
    run_s, _, best_summary = min(runs, key=lambda r: r[0])
    # Validated again in this process, with the floors: the last window, the only one whose end the
    # group's committed offsets still are (an earlier one fails its positions rule, as it should).
    _, window, summary = runs[-1]
    task = min(tasks, key=lambda t: t["task_s"])
    out: dict = {"records": records, "partitions": opts.partitions, "run_window_s": round(run_s, 3),
                 "run_window_job_s": best_summary.get("seconds"), "run_window_all_s": [round(r[0], 3) for r in runs],
                 "validate_task_all_s": [t["task_s"] for t in tasks]}
    jvm = server.pid()
    _reset_hwm(jvm)
    _reset_hwm("self")
    best = _best_validation(shop, spark, window, summary["run_id"], opts, server)
    server_kb, self_kb = _hwm_kb(jvm), _hwm_kb("self")
    out.update({
        "validate_task_s": task["task_s"], "validate_task_session_s": task["session_s"],
        "validate_task_run_s": task["validate_s"], "validate_task_timings": task["timings"],
        "validate_task_python_peak_rss_mb": task["python_peak_rss_mb"],
        **best,
        "validate_vs_run": round(task["task_s"] / run_s, 3),
        "validate_in_process_vs_run": round(best["validate_s"] / run_s, 3),
        "server_jvm_peak_rss_mb": server_kb and round(server_kb / 1024, 1),
        "bench_python_peak_rss_mb": self_kb and round(self_kb / 1024, 1),
        "target": validate_vs_run_target(records),
    })
    out["ok"] = out["validate_vs_run"] <= out["target"]
    floor = read_floor(spark, shop.settings, window, best["output_read"])
    floor_task = _task(READ_FLOOR_TASK, shop.spec(window, output_read=best["output_read"]), client_env)
    # The task's floor: a client process that only reads (imports, session, the reads), and Great
    # Expectations' own import, which any validation with it pays once per process.
    out["read_floor"] = {**floor, "vs_run": round(floor["total_s"] / run_s, 3),
                         "contract_vs_run": round(floor["contract_floor_s"] / run_s, 3), "task_s": floor_task["task_s"],
                         "task_vs_run": round(floor_task["task_s"] / run_s, 3),
                         "ge_import_s": floor_task["ge_import_s"],
                         "task_with_ge_import_vs_run": round((floor_task["task_s"] + floor_task["ge_import_s"])
                                                             / run_s, 3)}
    if records <= opts.before_max:
        out["before"] = _before_column(shop, window, summary["run_id"], run_s, opts, work, records)
    log.info("validation at %d purchases: %s", records, out)
    return out


def run(opts: ScalingOptions) -> dict:
    work = paths.var_dir() / "bench-validation"
    stop_leftovers(work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    target = KafkaTarget.start("single", work / "kafka", size=1, heap="1g")
    server = None
    try:
        t0 = time.monotonic()
        server = SparkConnectServer(home=work / "spark-connect", port=free_port()).start()
        started_s = round(time.monotonic() - t0, 1)
        os.environ.update(server.client_env())
        spark = spark_session("eos-etl-bench-validation")
        try:
            data = {"options": {**asdict(opts), "out": str(opts.out),
                                "before_code": str(opts.before_code) if opts.before_code else None},
                    "route": {"spark_connect_server": server.describe(), "server_start_s": started_s},
                    "history": history_phase(target, spark, opts, work),
                    "sizes": [size_phase(target, server, spark, opts, work, n) for n in opts.sizes]}
        finally:
            stop_session(spark)
    finally:
        if server is not None:
            server.stop()
        target.stop()
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "validation_scaling.json").write_text(json.dumps(data, indent=2) + "\n")
    return data


def _before_cell(before: dict | None) -> str:
    if not before:
        return "not measured"
    if "failed" in before:
        return f"failed: {before['failed']}"
    return f"{before['task_s']:.1f} s ({before['vs_run']:.2f}x)"


def summary(data: dict) -> str:
    h = data["history"]
    first, last = h["after_1"], h["after_" + str(h["history"])]
    lines = [f"history: {h['window_records']:,} purchases/window, margin {h['margin_ms']} ms: validate "
             f"{first['validate_s']:.1f}s after 1 window (span {first['output_span']}), "
             f"{last['validate_s']:.1f}s after {h['history']} (span {last['output_span']}) and "
             f"{h.get('ge_history_results', 0):,} earlier GE results: ratio {h['ratio']:.2f} "
             f"(target <= {HISTORY_RATIO_TARGET}) {'ok' if h['ok'] else 'MISSED'}",
             "| purchases | run_window task | validate task (x run) | target | validate in process (x run; server "
             "jobs) | GE share | read floor in process / task | contract floor | before: fresh local Spark (x run) | "
             "server JVM peak RSS | client peak RSS |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in data["sizes"]:
        before = s.get("before")
        floor = s["read_floor"]
        lines.append(
            f"| {s['records']:,} | {s['run_window_s']:.1f} s | {s['validate_task_s']:.1f} s "
            f"({s['validate_vs_run']:.2f}x) {'ok' if s['ok'] else 'MISSED'} | <= {s['target']}x | "
            f"{s['validate_s']:.1f} s ({s['validate_in_process_vs_run']:.2f}x; {s['server_jobs']} jobs) | "
            f"{s['ge_share']:.0%} | "
            f"{floor['total_s']:.1f} s ({floor['vs_run']:.2f}x) / {floor['task_s']:.1f} s "
            f"({floor['task_vs_run']:.2f}x; {floor['task_with_ge_import_vs_run']:.2f}x with GE's import) | "
            + (f"{floor['contract_floor_s']:.1f} s ({floor['contract_vs_run']:.2f}x) | " if "contract_floor_s" in floor
               else "- | ")
            + _before_cell(before)
            + f" | {s['server_jvm_peak_rss_mb']} MB | {s['validate_task_python_peak_rss_mb']} MB |")
    return "\n".join(lines)
