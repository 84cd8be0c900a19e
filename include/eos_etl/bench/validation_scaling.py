"""How data-quality validation scales: with the topics' history, and with the window.

``python -m eos_etl.bench --only validation-scaling`` runs, against its own
single-node Kafka (under ``var/bench-validation/``) and one local SparkSession:

* history: equal windows of ``window_records`` purchases are run one after the
  other on the same topics; the window after 1 earlier window and the window
  after ``history`` earlier windows are validated (best of ``repeats``). The
  ratio is the figure (target <= 1.2): validation reads the input window and
  the output topics from the window's earliest input time minus the clock-skew
  margin on, so earlier windows cost nothing once they are older than the
  margin. The bench makes its history in minutes, so ``margin_ms`` (default:
  :data:`eos_etl.quality.collect.CLOCK_SKEW_MARGIN_MS`) is usually set lower
  to stand for a history older than the margin; the output offsets actually
  read (``span``) are reported with each figure. Before the second measurement the
  Great Expectations project is also given ``ge_history`` earlier validation results
  per suite (copies, dated before the window), standing for months of hourly runs:
  validation must prune them rather than slow down with them.
* size: for each of ``sizes`` purchases in one window, ``run_window`` seconds,
  validation seconds (target <= 0.3x) and the peak RSS of the driver's Python
  process and of its JVM during validation (``VmHWM``, reset before it through
  ``/proc/<pid>/clear_refs``).

Results go to ``<out>/validation_scaling.json``; a summary is printed.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import paths
from ..kafka.topics import ensure_topics
from ..quality import validate_run
from ..quality.collect import CLOCK_SKEW_MARGIN_MS, read_outputs
from ..shop.generator import generate
from ..shop.pipeline import ShopSettings, run_shop_window
from ..shop.schema import ShopTopics
from ..stack.session import spark_session
from .targets import KafkaTarget, stop_leftovers

log = logging.getLogger(__name__)

HISTORY_RATIO_TARGET = 1.2
VALIDATE_VS_RUN_TARGET = 0.3


@dataclass
class ScalingOptions:
    window_records: int = 2_000  # purchases per window of the history phase
    history: int = 20  # earlier windows before the last measured one
    sizes: list[int] = field(default_factory=lambda: [100_000])  # purchases per window of the size phase
    partitions: int = 4
    repeats: int = 2  # validations per measured window; the fastest counts
    ge_history: int = 2_000  # earlier GE validation results per suite before the second history figure
    margin_ms: int = CLOCK_SKEW_MARGIN_MS
    out: Path = Path("docs")


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

    def run_window(self, spark, records: int, seed: int):
        generate(self.settings.connection, self.settings.topics.purchases, records, invalid_share=0.05, seed=seed)
        window = self.settings.plan()
        t0 = time.monotonic()
        summary = run_shop_window(spark, self.settings, window)
        return window, summary, time.monotonic() - t0

    def validate(self, spark, window, run_id: str, margin_ms: int):
        report = validate_run(spark, self.settings, window, run_id=run_id, context_root=self.gx_root,
                              clock_skew_margin_ms=margin_ms)
        if not report.success:
            raise RuntimeError(f"validation of a clean run failed: {report.messages}")
        return report


def _best_validation(shop: _Shop, spark, window, run_id: str, opts: ScalingOptions) -> dict:
    reports = [shop.validate(spark, window, f"{run_id}-{i}", opts.margin_ms) for i in range(opts.repeats)]
    best = min(reports, key=lambda r: r.seconds)
    return {"validate_s": best.seconds, "all_s": [r.seconds for r in reports],
            "output_span": best.output_read["span"], "output_read": best.output_read,
            "inputs": best.counts.committed_inputs,
            "timings": best.timings}


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
        window, summary, _ = shop.run_window(spark, opts.window_records, seed)
        seed += 1
        if earlier == opts.history and opts.ge_history:
            out["ge_history_results"] = seed_ge_history(shop.gx_root, opts.ge_history)
        out[key] = _best_validation(shop, spark, window, summary.run_id, opts)
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


def _jvm_pid(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)  # the JVM launched by PySpark (local driver)
    return getattr(proc, "pid", None)


def read_floor(spark, settings, window, output_read: dict) -> dict:
    """Seconds to only count what the issue's checks must read, one Spark job each and no parsing:
    the window's inputs (read_committed), and the output span validation read (``output_read``, from
    its report), read_committed and read_uncommitted. No validation can cost less than reading these."""
    from ..engine.kafka_source import read_window  # deferred: pyspark, only when the read floor is measured

    starts = {t: {int(p): o for p, o in parts.items()} for t, parts in output_read["from_offsets"].items()}
    reads = {"inputs": lambda: read_window(spark, settings.pipeline(), window),
             "outputs_read_committed": lambda: read_outputs(spark, settings.connection, starts, "read_committed"),
             "outputs_read_uncommitted": lambda: read_outputs(spark, settings.connection, starts,
                                                              "read_uncommitted")}
    out: dict = {}
    for name, df in reads.items():
        t0 = time.monotonic()
        out[f"{name}_records"] = df().count()
        out[f"{name}_s"] = round(time.monotonic() - t0, 3)
    out["total_s"] = round(sum(v for k, v in out.items() if k.endswith("_s")), 3)
    return out


def size_phase(target: KafkaTarget, spark, opts: ScalingOptions, work: Path, records: int) -> dict:
    """run_window and validation seconds, and the driver's peak RSS during validation, for one window size."""
    shop = _Shop(target, opts.partitions, work / f"gx-size-{records}")
    window, summary, run_s = shop.run_window(spark, records, seed=records)
    jvm = _jvm_pid(spark)
    pids = ["self", *([jvm] if jvm else [])]
    for pid in pids:
        _reset_hwm(pid)
    result = _best_validation(shop, spark, window, summary.run_id, opts)
    python_kb, jvm_kb = _hwm_kb("self"), (_hwm_kb(jvm) if jvm else None)
    out = {"records": records, "partitions": opts.partitions, "run_window_s": round(run_s, 3), **result,
           "validate_vs_run": round(result["validate_s"] / run_s, 3),
           "driver_python_peak_rss_mb": python_kb and round(python_kb / 1024, 1),
           "driver_jvm_peak_rss_mb": jvm_kb and round(jvm_kb / 1024, 1)}
    out["ok"] = out["validate_vs_run"] <= VALIDATE_VS_RUN_TARGET
    floor = read_floor(spark, shop.settings, window, result["output_read"])
    out["read_floor"] = {**floor, "vs_run": round(floor["total_s"] / run_s, 3)}
    log.info("validation at %d purchases: %s", records, out)
    return out


def run(opts: ScalingOptions) -> dict:
    work = paths.var_dir() / "bench-validation"
    stop_leftovers(work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    target = KafkaTarget.start("single", work / "kafka", size=1, heap="1g")
    try:
        spark = spark_session("eos-etl-bench-validation")
        data = {"options": {**asdict(opts), "out": str(opts.out)},
                "history": history_phase(target, spark, opts, work),
                "sizes": [size_phase(target, spark, opts, work, n) for n in opts.sizes]}
    finally:
        target.stop()
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "validation_scaling.json").write_text(json.dumps(data, indent=2) + "\n")
    return data


def summary(data: dict) -> str:
    h = data["history"]
    first, last = h["after_1"], h["after_" + str(h["history"])]
    lines = [f"history: {h['window_records']:,} purchases/window, margin {h['margin_ms']} ms: validate "
             f"{first['validate_s']:.1f}s after 1 window (span {first['output_span']}), "
             f"{last['validate_s']:.1f}s after {h['history']} (span {last['output_span']}) and "
             f"{h.get('ge_history_results', 0):,} earlier GE results: ratio {h['ratio']:.2f} "
             f"(target <= {HISTORY_RATIO_TARGET}) {'ok' if h['ok'] else 'MISSED'}"]
    for s in data["sizes"]:
        lines.append(f"{s['records']:,} purchases: run_window {s['run_window_s']:.1f}s, validate "
                     f"{s['validate_s']:.1f}s = {s['validate_vs_run']:.2f}x (target <= {VALIDATE_VS_RUN_TARGET}) "
                     f"{'ok' if s['ok'] else 'MISSED'}; only reading what validation must read "
                     f"{s['read_floor']['total_s']:.1f}s = {s['read_floor']['vs_run']:.2f}x; driver peak RSS "
                     f"python {s['driver_python_peak_rss_mb']} MB, JVM {s['driver_jvm_peak_rss_mb']} MB")
    return "\n".join(lines)
