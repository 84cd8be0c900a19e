"""The peers side by side (``python -m eos_etl_lab bench --only peers``): the default route (``SC``, a client of
the long-lived Spark Connect server) beside what a data engineer would pick instead, each doing the shop's
transform over the same purchases on the same broker, one after the other in each repetition, each judged by
the independent checker:

* ``B3``: Spark's own Kafka writer (at least once: it commits no offsets, so the checker finds every output
  beyond the committed position, and reports it so);
* ``KS``: Kafka Streams with ``processing.guarantee=exactly_once_v2`` (KIP-447's reference), a stream thread
  per core, its default commit interval under exactly-once (100 ms), the transform in Java
  (``streams/ShopStreams.java``, the Python one's port, parsing with Jackson as Spark does);
* ``Q``: quixstreams with ``processing_guarantee="exactly-once"`` (:mod:`.quix_app`), at its default commit
  interval (5 s), the transform in Python (:mod:`.shop_python`, byte-identical to Spark's).

Per case: purchases/s (the median repetition's job time), CPU-s per million purchases and peak RSS of its
process tree (for SC the server's, counted from the case's start), the checker's verdict; and the default
route's ratio to each.
"""

from __future__ import annotations

from . import kafka_streams
from .environment import peer_python

#: The cases compared, in the order they run, with what the page calls them.
PEER_CASES = {"SC": "this project (default route: Spark Connect)", "B3": "Spark's Kafka writer (at least once)",
              "KS": "Kafka Streams, exactly_once_v2", "Q": "quixstreams, exactly-once"}


def run_peers(bench) -> None:
    """Every case of :data:`PEER_CASES` ``--repeats`` times over the main window, then the checker."""
    o = bench.opts
    peer_python("quixstreams")  # made before anything is measured (a minute, once per machine)
    bench.target.prepare_input(f"bench-purchases-p{o.partitions}", o.partitions, o.records,
                               o.input_transaction_size)
    bench.meta["inputs"] = dict(bench.target.inputs)
    bench.start_spark_connect()
    kafka_streams.classpath()  # fetched and compiled before anything is measured
    peer_dir = {"work_dir": str(bench.work / "specs")}
    extra = {"Q": peer_dir, "KS": peer_dir}
    for rep in range(1, o.repeats + 1):
        for case in PEER_CASES:
            row, settings = bench.run_case(case, size=o.records, pc=o.partitions, rep=rep, extra=extra.get(case),
                                           keep_topics=True, row_tags={"peers": True})
            # A peer commits its last record's offset + 1, short of a commit marker that ends a range.
            row["check"] = bench.check_s(settings, o.records, o.partitions, tags={"case": case, "peers": True},
                                         window_ends=case == "SC")
            bench.save()
            bench.drop_outputs(settings)
    bench.stop_spark_connect()


def summary(rows: list[dict]) -> list[dict]:
    """Per case: its median repetition's figures and the checker's verdicts."""
    out = []
    for case, name in PEER_CASES.items():
        mine = sorted((r for r in rows if r.get("peers") and r["case"] == case and r.get("job_s")),
                      key=lambda r: r["job_s"])
        if not mine:
            continue
        best = mine[len(mine) // 2]
        purchases = best["purchases"] or best["window_purchases"]
        checks = [r.get("check") or {} for r in mine]
        out.append({"case": case, "name": name, "purchases": purchases, "job_s": best["job_s"],
                    "per_s": round(purchases / best["job_s"]),
                    "cpu_s_per_m": round(best["cpu_s"] / purchases * 1e6, 1),
                    "peak_rss_mb": best["peak_rss_mb"], "runs_ok": all(r["ok"] for r in mine),
                    "exactly_once": all(c.get("ok") for c in checks),
                    "violations": [c.get("violations") for c in checks if not c.get("ok")][:1],
                    "job_s_all": [r["job_s"] for r in mine]})
    return out


def markdown(rows: list[dict]) -> str:
    cases = summary(rows)
    ours = next((c for c in cases if c["case"] == "SC"), None)
    lines = ["| case | purchases/s | CPU-s per million | peak RSS | checker | SC's ratio (speed / CPU) |",
             "|---|--:|--:|--:|---|--:|"]
    for c in cases:
        ratio = "" if ours is None or c is ours else (f"{ours['per_s'] / c['per_s']:.2f}x / "
                                                      f"{c['cpu_s_per_m'] / ours['cpu_s_per_m']:.2f}x")
        found = ", ".join(f"{k} {v:,}" for k, v in sorted((c["violations"] or [{}])[0].items()))
        verdict = "exactly once" if c["exactly_once"] else f"NOT exactly once ({found or 'see its check'})"
        lines.append(f"| {c['case']} {c['name']} | {c['per_s']:,} | {c['cpu_s_per_m']:.0f} | {c['peak_rss_mb']:.0f} MB "
                     f"| {verdict} | {ratio} |")
    return "\n".join(lines)


def page(data: dict, command: str) -> str:
    """docs/peers.md: what was compared and how, the table, the machine."""
    machine = data.get("meta", {}).get("machine_start", {})
    cases = {c["case"]: c for c in summary(data["rows"])}
    q = cases.get("Q", {})
    return "\n".join([
        "# The peers side by side",
        "",
        f"Written by `{command}` on {machine.get('date', '?')} ({machine.get('cores', '?')} cores, "
        f"{machine.get('cpu', '?')}; Kafka {machine.get('kafka_broker', '?')}, Spark {machine.get('spark', '?')}). "
        "Each case does the shop's transform over the same purchases on the same broker, one after the other in "
        f"each of {data['options']['repeats']} repetitions; the median repetition is shown. Each is judged by the "
        "independent checker (`eos_etl.checker`) over its own output topics and consumer group.",
        "",
        markdown(data["rows"]),
        "",
        "- **SC**: this project's default route, `run-window` as a client of the long-lived Spark Connect server "
        "(`local[*]`); its CPU and memory are the client's and the server's. Its job time runs from the session "
        "to the last commit.",
        "- **B3**: Spark's own Kafka writer (`df.write.format(\"kafka\")`) of the same transform and lineage "
        "headers: at least once by design (it commits no offsets and no transaction), which the checker reports.",
        "- **KS**: Kafka Streams (the broker's version) with `processing.guarantee=exactly_once_v2`, a stream "
        "thread per core, its default commit interval under exactly-once (100 ms, a transaction per thread each "
        "time); the transform in Java (`streams/ShopStreams.java`, the Python one line for line, parsing with "
        "Jackson as Spark does). Its job time runs from `KafkaStreams.start()` to `close()`'s return (the group's "
        "join and the last commit included).",
        "- **Q**: quixstreams with `processing_guarantee=\"exactly-once\"` at its default commit interval "
        f"({q.get('commit_interval_s', 5.0)} s; each checkpoint one transaction with the group's offsets), its "
        "transform in Python (`eos_etl_lab.bench.peers.shop_python`: byte for byte Spark's on the generator's "
        "purchases and the hostile set, `scripts/peer_parity.py`), in an environment of its own (it pins "
        "confluent-kafka below the project's). Its job time runs from `Application.run()` to its return after "
        "the last commit, the consumer group's join included.",
        "",
        "What the ratios mean: SC's purchases/s over the peer's (above 1: SC is faster), and the peer's CPU "
        "per purchase over SC's (above 1: SC costs less CPU per purchase). Figures of every repetition: "
        "[peers.json](peers.json).",
        "",
        *_ahead(cases),
    ])


def _ahead(cases: dict) -> list[str]:
    """Where a peer is ahead of the default route, by how much, and why (what differs on its path)."""
    ours = cases.get("SC")
    if ours is None:
        return []
    lines = []
    for case, c in cases.items():
        faster, leaner = c["per_s"] > ours["per_s"], c["cpu_s_per_m"] < ours["cpu_s_per_m"]
        if case != "SC" and (faster or leaner):
            lines.append(f"- **{case} is ahead**: " + "; ".join(
                ([f"{c['per_s'] / ours['per_s']:.2f}x SC's purchases/s"] if faster else [])
                + ([f"{ours['cpu_s_per_m'] / c['cpu_s_per_m']:.2f}x less CPU per purchase"] if leaner else [])) + ".")
    if lines:
        lines = ["## Where a peer is ahead", "", *lines, "",
                 "Why, from what differs on the paths: SC's records leave the JVM, where Spark parses, checks and "
                 "renders them, through Arrow into a Python worker that produces each one with confluent-kafka "
                 "inside its writer slot's transaction (`make bench-breakdown` shows the stages); Kafka Streams "
                 "parses and renders each purchase in the same JVM its producer runs in, and Spark's Kafka writer "
                 "produces from the JVM with no transaction at all. The per-record work of the JVM's expressions "
                 "and of the publishing loop is where the default route's next gains are "
                 "(docs/performance-history.md).", ""]
    return lines
