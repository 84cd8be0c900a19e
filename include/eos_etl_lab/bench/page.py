"""The benchmarks page: a bench run's raw rows turned into docs/benchmarks.md and docs/benchmarks.png.

Every figure is the median over the repetitions of one (case, window size,
input partitions). Throughput is computed on the **job** basis by default
(the case's own timing of its work: Spark session start-up, interpreter start
and payload loading excluded) and also shown on the **wall** basis (the whole
subprocess, start-up included). Ratios use the job basis for every case, so
S and B3 are compared like for like.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from .cluster_compare import CASES as COMPARED_CASES
from .cluster_compare import TARGET_FIELD
from .regimes import summarise as summarise_regimes

#: The hand-written docs page (beside this one) on how the figures came to be.
HISTORY_PAGE = "performance-history.md"
#: The page's Jinja2 templates (benchmarks.md.j2 and the sections it includes).
TEMPLATES = Path(__file__).parent / "templates"

DESCRIPTIONS = {
    "B1": "raw confluent-kafka idempotent producer, pre-built records (Python producer ceiling)",
    "B2": "B1 in transactions of k purchases, offsets via send_offsets_to_transaction",
    "B3": "Spark `df.write.format(\"kafka\")` of the same transform (at-least-once)",
    "S": "our exactly-once job (`run_shop_window`), a fresh Spark application (spark-submit) per window",
    "SC": "the same job as a client of a long-lived Spark Connect server (`eos_etl.embedded.spark_connect`); "
          "CPU and RSS include the server's",
    "N": "one transaction per purchase: consume, produce, send offsets, commit",
    "R": "Spark Kafka read (read_committed) + `count()`",
}

TARGETS = {
    "S/B3": 0.8,
    "B2/B1": 0.95,
    "S/N": 1000.0,
    "linearity_pct": 20.0,
    "memory_growth": 1.2,
    "end_proof_share": 0.02,  # a task's window-end proof <= 2 % of its window's job time
}
# Publishing per core (a spark-submit per window and a Connect client), checked on every run next to the older
# targets above.
PUBLISH_TARGETS = {
    "S cpu vs R+B1": 1.3,  # S CPU s per million purchases <= 1.3 x (R + B1), main window
    "S pps at 1M": 25_000.0,  # S purchases/s (job) at the largest window of >= 1,000,000
    "S fixed s": 6.0,  # the affine fit's fixed seconds per window
    "S/N": 250.0,
    "S/B3": 1.8,
}
# The default route (SC, a client of the long-lived Spark Connect server), with the kill-safe commit in place.
DEFAULT_ROUTE_TARGETS = {
    "pps at 1M": 50_000.0,  # purchases/s (job) at the largest window of >= 1,000,000
    "fixed s": 1.5,  # the affine fit's fixed seconds per window
    "cpu vs R+B1": 0.9,  # CPU s per million purchases (server and client) <= 0.9 x (R + B1), main window
}


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def aggregate(rows: list[dict]) -> dict[tuple[str, int, int], dict]:
    groups: dict[tuple[str, int, int], list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("ok"):
            groups[(r["label"], r["size"], r["pc"])].append(r)
    out = {}
    for key, rs in groups.items():
        purchases = _median([r["purchases"] for r in rs])
        outputs = _median([r["outputs"] for r in rs])
        job = _median([r["job_s"] for r in rs])
        wall = _median([r["wall_s"] for r in rs])
        cpu = _median([r["cpu_s"] for r in rs])
        broker = _median([r.get("broker_cpu_s") for r in rs])
        per_m = 1e6 / purchases if purchases else None
        out[key] = {
            "label": key[0], "case": rs[0]["case"], "size": key[1], "pc": key[2], "runs": len(rs),
            "purchases": purchases, "outputs": outputs, "job_s": job, "wall_s": wall,
            "startup_s": _median([r.get("startup_s") for r in rs]),
            "cpu_s": cpu, "broker_cpu_s": broker, "peak_rss_mb": _median([r["peak_rss_mb"] for r in rs]),
            "pps": purchases / job if purchases and job else None,
            "ops": outputs / job if outputs and job else None,
            "pps_wall": purchases / wall if purchases and wall else None,
            "cpu_per_m": cpu * per_m if cpu is not None and per_m else None,
            "broker_cpu_per_m": broker * per_m if broker is not None and per_m else None,
            "s_per_m": job * per_m if job and per_m else None,
            "s_per_m_wall": wall * per_m if wall and per_m else None,
            "transactions": _median([r.get("transactions") for r in rs]),
            "commit_s": _median([r.get("result", {}).get("commit_s") for r in rs]),
            "send_offsets_s": _median([r.get("result", {}).get("send_offsets_s") for r in rs]),
            "init_s": _median([r.get("result", {}).get("init_s") for r in rs]),
            "load": _median([(r.get("load_1m") or [None])[0] for r in rs]),
            "txn_share": _median([(r["result"]["commit_s"] + r["result"]["send_offsets_s"]) / r["job_s"] for r in rs
                                  if r.get("result", {}).get("commit_s") is not None and r["job_s"]]),
            # B2: throughput without the one-time init_transactions (per producer, not per transaction).
            "pps_no_init": _median([r["purchases"] / (r["job_s"] - r["result"]["init_s"]) for r in rs
                                    if r.get("result", {}).get("init_s") is not None
                                    and r["job_s"] > r["result"]["init_s"]]),
            "spread": (min(r["job_s"] for r in rs), max(r["job_s"] for r in rs)),
            # The regimes' rows (bench.regimes): the server's Python workers as each window started.
            "workers_before": _range([r.get("python_workers_before") for r in rs]),
        }
    return out


def _range(values) -> tuple | None:
    values = [v for v in values if v is not None]
    return (min(values), max(values)) if values else None


def _f(v, fmt="{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def _ratio(a, b) -> float | None:
    return a / b if a and b else None


def _against_base(sv: dict, base: dict) -> dict:
    """One window size's S row against the main size's: seconds per million and peak memory, and how far each
    moved."""
    return {
        "s_per_m": sv["s_per_m"], "dev_pct": 100 * (sv["s_per_m"] / base["s_per_m"] - 1),
        "s_per_m_wall": sv["s_per_m_wall"], "dev_wall_pct": 100 * (sv["s_per_m_wall"] / base["s_per_m_wall"] - 1),
        "peak_rss_mb": sv["peak_rss_mb"], "mem_vs_base": sv["peak_rss_mb"] / base["peak_rss_mb"],
    }


def compute(data: dict) -> dict:
    o = data["options"]
    # The cluster comparison's rows have their own section (compute_cluster); the tables below are single-node.
    agg = aggregate([r for r in data["rows"] if TARGET_FIELD not in r])
    n, p = o["records"], o["partitions"]
    main = {k[0]: v for k, v in agg.items() if k[1] == n and k[2] == p}
    b1, b3, s, nn = (main.get(x, {}).get("pps") for x in ("B1", "B3", "S", "N"))
    b3w, sw = (main.get(x, {}).get("pps_wall") for x in ("B3", "S"))
    ratios = {"S/B3": _ratio(s, b3), "S/B3 (wall, incl. start-up)": _ratio(sw, b3w), "S/B1": _ratio(s, b1)}
    b2, b2_no_init = {}, {}
    for k in o["txn_sizes"]:
        if row := main.get(f"B2(k={k})"):
            ratios[f"B2(k={k})/B1"] = b2[k] = _ratio(row["pps"], b1)
    for k in o["txn_sizes"]:
        if (row := main.get(f"B2(k={k})")) and row.get("pps_no_init"):
            ratios[f"B2(k={k})/B1 excl. init_transactions"] = b2_no_init[k] = _ratio(row["pps_no_init"], b1)
    ratios["S/N"] = _ratio(s, nn)
    if main.get("SC"):
        ratios["SC/N"] = _ratio(main["SC"]["pps"], nn)
        ratios["SC/B3"] = _ratio(main["SC"]["pps"], b3)
        ratios["SC/S"] = _ratio(main["SC"]["pps"], s)
    # S publishes through the same Python producer as B1, so S/N can never exceed B1/N on this machine.
    ratios["B1/N (ceiling for S/N)"] = _ratio(b1, nn)
    sizes = {}
    for (label, size, pc), v in agg.items():
        if pc == p and label in ("S", "SC", "B3"):
            sizes.setdefault(size, {})[label] = v
    parts = {pc: v for (label, size, pc), v in agg.items() if label == "S" and size == n}
    base = sizes.get(n, {}).get("S")
    linear = {size: _against_base(d["S"], base) for size, d in sorted(sizes.items()) if d.get("S") and base}
    fits = {}
    for label in ("S", "SC", "B3"):
        pts = [(size, d[label]["job_s"]) for size, d in sizes.items() if label in d and d[label]["job_s"]]
        fits[label] = linear_fit(pts)
    targets = []

    def target(name, value, ok, want):
        targets.append({"name": name, "value": value, "ok": ok, "want": want})

    if ratios["S/B3"] is not None:
        target("S/B3 (job basis)", f"{ratios['S/B3']:.2f}", ratios["S/B3"] >= TARGETS["S/B3"], ">= 0.8")
    for k, r in b2.items():
        if k >= 10_000 and r is not None:
            target(f"B2(k={k:,})/B1", f"{r:.2f}", r >= TARGETS["B2/B1"], ">= 0.95")
    for k, r in b2_no_init.items():
        if k >= 10_000 and r is not None:
            target(f"B2(k={k:,})/B1 excl. the one-time init_transactions", f"{r:.2f}", r >= TARGETS["B2/B1"],
                   ">= 0.95")
    if ratios["S/N"] is not None:
        target("S/N", f"{ratios['S/N']:,.0f}x", ratios["S/N"] >= TARGETS["S/N"], ">= 1000x")
    for size, d in linear.items():
        if size != n:
            target(f"time linear, S at {size:,} (job s per M vs {n:,})", f"{d['dev_pct']:+.0f} %",
                   abs(d["dev_pct"]) <= TARGETS["linearity_pct"], "within ±20 %")
    sfit = fits.get("S")
    if sfit and sfit["points"] >= 3:
        worst = max(abs(v) for v in sfit["residual_pct"].values())
        target(f"time linear, S job s vs the affine fit {sfit['fixed_s']:.1f} s + {sfit['per_m_s']:.1f} s/M "
               "(worst size)", f"{worst:.0f} %", worst <= TARGETS["linearity_pct"], "within ±20 %")
    for size, d in linear.items():
        if size > n:
            target(f"memory flat, S peak RSS at {size:,} vs {n:,}", f"{d['mem_vs_base']:.2f}x",
                   d["mem_vs_base"] <= TARGETS["memory_growth"], "<= 1.2x")
    for label in ("S", "SC"):
        if main.get(label):
            _publish_targets(target, label, main, sizes, fits.get(label), ratios, n)
    regimes = summarise_regimes(agg, p, linear_fit)
    if main.get("SC"):
        _default_route_targets(target, main, sizes, fits.get("SC"), regimes)
    _end_proof_targets(target, data["rows"])
    return {"agg": agg, "main": main, "ratios": ratios, "sizes": sizes, "parts": parts, "linear": linear,
            "targets": targets, "b2": b2, "fits": fits, "regimes": regimes, "cluster": compute_cluster(data)}


def end_proof_shares(rows: list[dict]) -> dict[tuple[str, int], float]:
    """Per (case, size) of the single-node S and SC runs, the worst share of a window's job time that one
    task spent proving its window end (reading the tail after its last record), over the repetitions."""
    shares: dict[tuple[str, int], float] = {}
    for r in rows:
        proofs = (r.get("result") or {}).get("end_proof_s")
        if r.get("case") in ("S", "SC") and TARGET_FIELD not in r and r.get("ok") and r.get("job_s") and proofs:
            key = (r["case"], r["size"])
            shares[key] = max(shares.get(key, 0.0), max(proofs) / r["job_s"])
    return shares


def _end_proof_targets(target, rows: list[dict]) -> None:
    for (label, size), share in sorted(end_proof_shares(rows).items()):
        target(f"window-end proof, {label} at {size:,} (the slowest task's proof / the window's job time)",
               f"{100 * share:.2f} %", share <= TARGETS["end_proof_share"], "<= 2 %")


def _largest_million(sizes: dict, label: str) -> int | None:
    """The largest window of at least 1,000,000 purchases that ``label`` ran, if any."""
    return max((size for size, d in sizes.items() if size >= 1_000_000 and d.get(label)), default=None)


def _publish_targets(target, label: str, main: dict, sizes: dict, fit: dict | None, ratios: dict, n: int) -> None:
    """The publish-per-core targets (:data:`PUBLISH_TARGETS`) for ``label`` (S: a spark-submit per window; SC: a client
    of a long-lived Spark Connect server), each only when the run measured what it needs."""
    t = PUBLISH_TARGETS
    cpu, r_cpu, b1_cpu = (main.get(x, {}).get("cpu_per_m") for x in (label, "R", "B1"))
    if cpu and r_cpu and b1_cpu:
        bound = t["S cpu vs R+B1"] * (r_cpu + b1_cpu)
        target(f"publish per core: {label} CPU s per M purchases vs 1.3 x (R + B1)", f"{cpu:,.0f} vs {bound:,.0f}",
               cpu <= bound, "<= 1.3 x (R + B1)")
    big = _largest_million(sizes, label)
    if big:
        pps = sizes[big][label]["pps"]
        target(f"publish per core: {label} purchases/s at {big:,}", f"{pps:,.0f}", pps >= t["S pps at 1M"], ">= 25,000")
    if fit:
        target(f"publish per core: {label} fixed cost per window (affine fit over {fit['points']} sizes)",
               f"{fit['fixed_s']:.1f} s", fit["fixed_s"] <= t["S fixed s"], "<= 6 s")
    if ratios.get(f"{label}/N") is not None:
        target(f"publish per core: {label}/N", f"{ratios[f'{label}/N']:,.0f}x", ratios[f"{label}/N"] >= t["S/N"],
               ">= 250x")
    if ratios.get(f"{label}/B3") is not None:
        target(f"publish per core: {label}/B3 (job basis)", f"{ratios[f'{label}/B3']:.2f}",
               ratios[f"{label}/B3"] >= t["S/B3"], ">= 1.8")
    if label != "S" and big and sizes.get(n, {}).get(label):  # S has its own memory row above
        growth = sizes[big][label]["peak_rss_mb"] / sizes[n][label]["peak_rss_mb"]
        target(f"publish per core: {label} peak RSS at {big:,} vs {n:,} (client + server)", f"{growth:.2f}x",
               growth <= TARGETS["memory_growth"], "<= 1.2x")


def _default_route_targets(target, main: dict, sizes: dict, fit: dict | None, regimes: dict | None) -> None:
    """The default route's own targets (:data:`DEFAULT_ROUTE_TARGETS`), stricter than the publish-per-core ones.

    The fixed cost comes from the two regimes apart when the run measured them (:mod:`.regimes`), else from
    the scale curve's fit."""
    t = DEFAULT_ROUTE_TARGETS
    big = _largest_million(sizes, "SC")
    if big:
        pps = sizes[big]["SC"]["pps"]
        target(f"default route: SC purchases/s at {big:,}", f"{pps:,.0f}", pps >= t["pps at 1M"],
               f">= {t['pps at 1M']:,.0f}")
    want = f"<= {t['fixed s']} s"
    back = regimes and regimes["fit"]
    if back and back["points"] >= 2:
        target(f"default route: SC fixed cost per window, windows back to back (affine fit over {back['points']} "
               "sizes)", f"{back['fixed_s']:.1f} s", back["fixed_s"] <= t["fixed s"], want)
        if regimes["pause_extra_s"] is not None:
            paused = back["fixed_s"] + regimes["pause_extra_s"]
            target(f"default route: SC fixed cost per window after a pause (the back-to-back fit + what the pause "
                   f"added at {regimes['pause_size']:,})", f"{paused:.1f} s", paused <= t["fixed s"], want)
    elif fit:
        target(f"default route: SC fixed cost per window (affine fit over {fit['points']} sizes)",
               f"{fit['fixed_s']:.1f} s", fit["fixed_s"] <= t["fixed s"], want)
    cpu, r_cpu, b1_cpu = (main.get(x, {}).get("cpu_per_m") for x in ("SC", "R", "B1"))
    if cpu and r_cpu and b1_cpu:
        bound = t["cpu vs R+B1"] * (r_cpu + b1_cpu)
        target(f"default route: SC CPU s per M purchases vs {t['cpu vs R+B1']} x (R + B1)",
               f"{cpu:,.0f} vs {bound:,.0f}", cpu <= bound, f"<= {t['cpu vs R+B1']} x (R + B1)")


def compute_cluster(data: dict) -> dict | None:
    """S and B3 per Kafka target (medians), S/B3 on each and the cluster/single slowdown of each.

    Besides the ratios of the medians, the same ratios per repetition: the four cases of one repetition
    ran back to back, so a per-repetition ratio compares runs that saw the same machine load.
    """
    rows = [r for r in data["rows"] if TARGET_FIELD in r]
    if not rows:
        return None
    per_target = {}
    for target in ("single", "cluster"):
        agg = aggregate([r for r in rows if r[TARGET_FIELD] == target])
        per_target[target] = {label: v for (label, _size, _pc), v in agg.items()}
    jobs: dict[tuple[str, str, int], float] = {}
    for r in rows:
        if r.get("ok") and r.get("job_s"):
            jobs[(r[TARGET_FIELD], r["case"], r["rep"])] = r["job_s"]
    reps = sorted({r["rep"] for r in rows})

    def paired(numerator, denominator) -> list[float]:
        return [jobs[numerator + (rep,)] / jobs[denominator + (rep,)] for rep in reps
                if numerator + (rep,) in jobs and denominator + (rep,) in jobs]

    def pps(target, case):
        return per_target[target].get(case, {}).get("pps")

    ratios = {}
    for target in ("single", "cluster"):
        # S/B3 in throughput = B3's job time / S's job time (same window).
        ratios[f"S/B3 {target}"] = {"value": _ratio(pps(target, "S"), pps(target, "B3")),
                                    "per_rep": paired((target, "B3"), (target, "S"))}
    for case in COMPARED_CASES:
        # Slowdown: how many times longer the same job takes on the cluster.
        ratios[f"{case} slowdown"] = {"value": _ratio(pps("single", case), pps("cluster", case)),
                                      "per_rep": paired(("cluster", case), ("single", case))}
    loads = {(r[TARGET_FIELD], r["case"]): [] for r in rows}
    for r in sorted(rows, key=lambda r: r["rep"]):
        loads[(r[TARGET_FIELD], r["case"])].append((r.get("load_1m") or [None])[0])
    checks = [ch for ch in data.get("checks", []) if TARGET_FIELD in ch]
    return {"targets": per_target, "ratios": ratios, "loads": loads, "checks": checks}


def linear_fit(points: list[tuple[int, float]]) -> dict | None:
    """Least squares ``job_s = fixed_s + per_m_s * purchases / 1e6`` over the scale points."""
    if len(points) < 2:
        return None
    xs = [x / 1e6 for x, _ in points]
    ys = [y for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    fixed = my - slope * mx
    # How far each measured time is from the straight line (affine: fixed + per purchase).
    residuals = {x: 100 * (y / (fixed + slope * x / 1e6) - 1) for x, y in points if fixed + slope * x / 1e6 > 0}
    return {"fixed_s": fixed, "per_m_s": slope, "points": len(points), "residual_pct": residuals}


# -- markdown ---------------------------------------------------------------------------------
def _spread(v) -> str:
    """' (min-max)' of a figure's job seconds over its repetitions: how noisy the shared machine was."""
    if not v or v["runs"] < 2:
        return ""
    lo, hi = v["spread"]
    return f" ({lo:.1f}-{hi:.1f})"


def _span(pair) -> str:
    """'a' or 'a-b' of a (min, max) pair, '–' without one."""
    if not pair:
        return "–"
    return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}-{pair[1]}"


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(f=_f, spread=_spread, span=_span)
    return env


def render_markdown(data: dict, c: dict, command: str, png_name: str) -> str:
    """docs/benchmarks.md from the run's data and what :func:`compute` made of it."""
    o, main = data["options"], c["main"]
    b2 = [(label, v) for label, v in main.items() if label.startswith("B2(") and v.get("commit_s") is not None]
    return _environment().get_template("benchmarks.md.j2").render(
        data=data, c=c, cc=c.get("cluster"), command=command, png_name=png_name, history_page=HISTORY_PAGE,
        order=["B1", *[f"B2(k={k})" for k in o["txn_sizes"]], "B3", "S", "SC", "N", "R"],
        # The project's own texts (code spans with quotes in them), not data: not escaped.
        descriptions={k: Markup(v) for k, v in DESCRIPTIONS.items()},
        b2_by_transactions=sorted(b2, key=lambda kv: kv[1]["transactions"] or 0),
        target_field=TARGET_FIELD, compared_cases=COMPARED_CASES,
    )


# -- plot ----------------------------------------------------------------------------------------
def render_png(data: dict, c: dict, path: Path) -> None:
    # Deferred: matplotlib takes a second to import and only this picture needs it.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after the backend is chosen, as above

    o = data["options"]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    labels = [lab for lab in ["B1", *[f"B2(k={k})" for k in o["txn_sizes"]], "B3", "S", "SC", "N", "R"]
              if lab in c["main"]]
    vals = [c["main"][lab]["pps"] for lab in labels]
    colors = ["tab:red" if lab == "S" else "tab:gray" if lab.startswith("B") else "tab:blue" for lab in labels]
    ax.bar(labels, vals, color=colors)
    if vals:
        ax.set_yscale("log")
    ax.set_ylabel("purchases/s (job basis, log)")
    ax.set_title(f"{o['records']:,} purchases, {o['partitions']} partitions (median of {o['repeats']})")
    ax.tick_params(axis="x", rotation=45)
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)

    ax = axes[0][1]
    ks = sorted(k for k in o["txn_sizes"] if f"B2(k={k})" in c["main"])
    if ks:
        ax.plot(ks, [c["main"][f"B2(k={k})"]["pps"] for k in ks], "o-", label="B2 transactional")
    if "B1" in c["main"]:
        ax.axhline(c["main"]["B1"]["pps"], color="tab:gray", ls="--", label="B1 idempotent, no transactions")
        ax.axhline(0.95 * c["main"]["B1"]["pps"], color="tab:gray", ls=":", label="0.95 x B1")
    if "S" in c["main"]:
        ax.axhline(c["main"]["S"]["pps"], color="tab:red", ls="-.", label="S (exactly-once job)")
    if ks:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("purchases per transaction (k)")
    ax.set_ylabel("purchases/s (job basis)")
    ax.set_title("Transactions: producer throughput vs transaction size")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    sizes = sorted(c["sizes"])
    for label, color in (("S", "tab:red"), ("B3", "tab:gray")):
        xs = [s for s in sizes if label in c["sizes"][s]]
        ax.plot(xs, [c["sizes"][s][label]["s_per_m"] for s in xs], "o-", color=color,
                label=f"{label} s / M purchases (job)")
        ax.plot(xs, [c["sizes"][s][label]["s_per_m_wall"] for s in xs], "o:", color=color,
                label=f"{label} s / M purchases (wall)")
    if any("S" in c["sizes"][s_] or "B3" in c["sizes"][s_] for s_ in sizes):
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("window size (purchases)")
    ax.set_ylabel("seconds per million purchases")
    ax2 = ax.twinx()
    xs = [s for s in sizes if "S" in c["sizes"][s]]
    ax2.bar(xs, [c["sizes"][s]["S"]["peak_rss_mb"] for s in xs], width=[x * 0.3 for x in xs], alpha=0.2,
            color="tab:red", label="S peak RSS MB")
    ax2.set_ylabel("S peak RSS (MB, bars)")
    ax.set_zorder(ax2.get_zorder() + 1)  # lines above the memory bars
    ax.patch.set_visible(False)
    ax.set_title("Scale: time per purchase (flat = linear) and memory")
    ax.legend(fontsize=8, loc="upper right")

    ax = axes[1][1]
    pcs = sorted(c["parts"])
    ax.plot(pcs, [c["parts"][pc]["pps"] for pc in pcs], "o-", color="tab:red", label="S purchases/s (job)")
    ax.plot(pcs, [c["parts"][pc]["pps_wall"] for pc in pcs], "o:", color="tab:red", label="S purchases/s (wall)")
    if pcs:
        ax.set_xscale("log", base=2)
        ax.set_xticks(pcs, [str(p) for p in pcs])
    ax.set_xlabel("input partitions")
    ax.set_ylabel("purchases/s")
    ax.set_title(f"Scale: input partitions ({o['records']:,} purchases)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_page(data: dict, out_dir: Path, command: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    c = compute(data)
    png = out_dir / "benchmarks.png"
    render_png(data, c, png)
    md = out_dir / "benchmarks.md"
    md.write_text(render_markdown(data, c, command, png.name))
    (out_dir / "benchmarks.json").write_text(json.dumps(data, indent=1))
    return md, png
