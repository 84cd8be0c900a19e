"""Draw docs/architecture.png: the packages of include/eos_etl and the data path through them.

Run with the project's environment (matplotlib is a pinned dependency):
    .venv/bin/python scripts/draw_architecture.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: the picture only goes to a file

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.patches import FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "architecture.png"

KAFKA = "#fde2c4"
ENGINE = "#cfe3f7"
SPARK = "#d9ecd0"
QUALITY = "#eadcf3"
AIRFLOW = "#fbe7ee"
SUPPORT = "#eeeeee"
LAB = "#f6f0dc"  # the lab beside the product
LAB_INNER = "#fffaf0"


def box(ax, x, y, w, h, title, body="", color=SUPPORT, title_size=10.5, body_size=8.5):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.4,rounding_size=1.2",
                                facecolor=color, edgecolor="#555555", linewidth=1.1))
    ax.text(x + w / 2, y + h - 1.6, title, ha="center", va="top", fontsize=title_size, fontweight="bold")
    if body:
        ax.text(x + w / 2, y + h - 5.0, body, ha="center", va="top", fontsize=body_size, linespacing=1.35)


def arrow(ax, start, end, dashed=False, text="", text_offset=(0, 1.2), color="#333333"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.4,
                            "linestyle": "--" if dashed else "-", "shrinkA": 2, "shrinkB": 2})
    if text:
        ax.text((start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1], text,
                ha="center", va="bottom", fontsize=8, style="italic", color=color)


def draw(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(17, 10.5))
    ax.set_xlim(0, 170)
    ax.set_ylim(5, 105)
    ax.axis("off")
    ax.text(1, 103.5, "eos-etl: the data path (solid) and who drives it (dashed); "
            "boxes name packages of include/eos_etl (and its lab)",
            fontsize=12.5, fontweight="bold", va="top")

    # Orchestration band.
    box(ax, 22, 84, 147, 13, "Airflow 3: orchestration/dag_factory.py builds dags/shop_invoicing*.py",
        "plan_window  ->  has_new_records  ->  run_window (spark-submit, or a Spark Connect client)  ->  "
        "validate  ->  report\noperators, assets, alerts, event-driven runs (orchestration/);  "
        "reports web app behind Airflow's login (reports/app.py, mounted by plugins/eos_etl_reports.py)", AIRFLOW)

    # The data path.
    box(ax, 1, 46, 17, 24, "purchases", "input topic\n(Kafka, transactional\nproducers upstream;\n"
        "shop/generator.py\nfor the demo)", KAFKA)
    box(ax, 22, 46, 20, 24, "planner", "engine/planning/planner.py\n\nper partition:\ncommitted position\n"
        "-> last stable offset\n= the window\n(engine/window.py)", ENGINE)
    box(ax, 46, 46, 22, 24, "Spark read", "engine/tasks/kafka_source.py\n\nKafka source,\n"
        "isolation.level=\nread_committed,\n"
        "exact offset ranges\n+ shop/transform.py\n(Spark expressions)", SPARK)
    box(ax, 71, 40, 35, 36, "publishing task", "one Spark task per writer slot\n(engine/slots.py)\n"
        "engine/tasks/publish_task.py\nengine/publishing/: publisher.py,\ntransaction_loop.py\n"
        "init_transactions (fences older attempts)\n"
        "loop, one transaction per chunk:\n"
        "  produce invoices, shipments,\n  dead letters\n"
        "  + checkpoint record\n    (engine/checkpoint_log.py)\n"
        "  + send_offsets_to_transaction, commit\n"
        "engine/publishing/producer.py,\nengine/tasks/watchdog.py", ENGINE, body_size=8.2)
    outputs = [("invoices", KAFKA), ("shipments", KAFKA), ("purchases.dlq (dead letters)", KAFKA),
               ("<group>.checkpoints", KAFKA), ("consumer group offsets", KAFKA)]
    for i, (name, color) in enumerate(outputs):
        y = 70 - i * 6.6
        ax.add_patch(FancyBboxPatch((109, y), 24, 4.6, boxstyle="round,pad=0.3,rounding_size=0.8",
                                    facecolor=color, edgecolor="#555555", linewidth=1.0))
        ax.text(121, y + 2.3, name, ha="center", va="center", fontsize=8.8)
        arrow(ax, (106.4, 58), (108.6, y + 2.3))
    ax.text(121, 79.0, "Kafka transactions over\na writer slot's partitions", ha="center", va="center",
            fontsize=8.5, style="italic")
    box(ax, 137, 52, 15, 22, "validation", "quality/\n\nGreat Expectations\n1.x suites on what\na read_committed\n"
        "reader sees", QUALITY, body_size=8)
    box(ax, 155, 52, 14, 22, "reports", "reports/\nverdict.py,\nstore.py,\npages.py,\nData Docs\n\nvar/reports/",
        QUALITY, body_size=8)

    arrow(ax, (18.4, 58), (21.6, 58))
    arrow(ax, (42.4, 58), (45.6, 58), text="window")
    arrow(ax, (68.4, 58), (70.6, 58))
    arrow(ax, (133.4, 63), (136.6, 63))
    arrow(ax, (152.4, 63), (154.6, 63))

    # Who drives what.
    for x in (32, 57, 144.5, 162):
        arrow(ax, (x, 83.6), (x, 70.6 if x < 140 else 74.6), dashed=True, color="#a0456a")

    # Supporting packages: the runtime a task needs, the launchers of the embedded stack, the lab beside.
    box(ax, 1, 8, 30, 25, "embedded/  (starts, stops)",
        "Kafka: one KRaft node or a\n3-node cluster (kafka_cluster.py)\n"
        "Spark standalone, the Connect\nserver (spark_connect.py)\n"
        "Airflow standalone (airflow.py)\nTLS; compose runs the same\nin containers",
        SUPPORT, body_size=8.2)
    box(ax, 33, 8, 28, 25, "spark/ + kafka/  (runtime)",
        "spark/: the session a run opens,\nits conf and jars, the Connect\nclient, the worker daemon\n"
        "kafka/: confluent-kafka admin,\noffsets, ACLs, SCRAM users,\nbounded reader, retry\n"
        "(jvm/, jars/, host/ below)", SUPPORT, body_size=8.2)
    box(ax, 63, 8, 20, 25, "shop/", "the shop on top of\nthe generic engine:\nschema, transform,\n"
        "settings (pipeline.py),\ndemo generator", SUPPORT, body_size=8.2)
    box(ax, 86, 8, 83, 25, "the lab beside: include/eos_etl_lab  (never imported by the product)", "", LAB)
    box(ax, 88, 9.5, 38, 19.5, "faults/  (make soak*)",
        "kills, pauses, broker faults,\nnetwork partitions (netns),\nrandom operation histories;\n"
        "judged by checker.py, the\nindependent exactly-once checker\n-> docs/reliability.md", LAB_INNER, body_size=8.0)
    box(ax, 129, 9.5, 38, 19.5, "bench/  (make bench*)",
        "this job vs Spark's at-least-once\nwriter, the raw producer and\n"
        "one transaction per record;\nscale curve, partitions, Connect\nroute -> docs/benchmarks.md",
        LAB_INNER, body_size=8.0)
    ax.text(85, 37.2, "cli/: python -m eos_etl <command> runs every piece by hand;  "
            "python -m eos_etl_lab soak|bench the lab;  jobs/run_window.py is the spark-submit entry point",
            ha="center", fontsize=9, style="italic")

    fig.savefig(out, dpi=110, bbox_inches="tight", facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(OUT if len(sys.argv) < 2 else sys.argv[1])
