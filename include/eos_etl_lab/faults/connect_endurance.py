"""Months of windows on one Spark Connect server: its resources after hundreds of windows.

One server runs ``windows`` consecutive small windows, each as production runs
one: the supervisor's ``ensure_running`` (log rotation, event-log pruning, the
health probe), then a real ``run-window`` client process. After every window
the server's threads, resident memory (the JVM and its Python workers), open
files, live client sessions and on-disk logs (``server.out`` and the event
log) are sampled. After the warm-up none may grow: the largest value of the
second half must stay within :data:`FLAT_RATIO` of the largest of the first
(logs rotate, so their size is a saw-tooth below a bound); the checker must
find every window exact. The samples go to ``var/soak/connect_endurance.json`` and a plot next
to docs/reliability.md.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from pathlib import Path

import psutil

from eos_etl import paths
from eos_etl.shop.generator import generate

from .lab import Lab, TrialResult
from .trial import trial

log = logging.getLogger(__name__)

FLAT_RATIO = 1.1
WARMUP_WINDOWS = 50
METRICS = ("threads", "rss_mb", "open_files", "sessions", "log_mb")
_SESSION_STARTED = b'SparkListenerConnectSessionStarted"'
_SESSION_CLOSED = b'SparkListenerConnectSessionClosed"'


class SessionCount:
    """Client sessions the server holds: started minus closed, per its event log.

    The event log rolls and its older files are pruned between windows, so the count keeps what each
    file held when it was last read: a file is read at least once before it goes (it rolls after
    dozens of windows)."""

    def __init__(self, event_log_dir: Path):
        self.event_log_dir = event_log_dir
        self.per_file: dict[str, tuple[int, int]] = {}

    def __call__(self) -> int | None:
        for path in self.event_log_dir.glob("eventlog_v2_*/events_*"):
            started = closed = 0
            with open(path, "rb") as f:
                for line in f:
                    started += _SESSION_STARTED in line
                    closed += _SESSION_CLOSED in line
            self.per_file[str(path)] = (started, closed)
        started = sum(s for s, _ in self.per_file.values())
        return started - sum(c for _, c in self.per_file.values()) if started else None


def sample(server, sessions: SessionCount) -> dict:
    pid = server.pid()
    jvm = psutil.Process(pid)
    rss = jvm.memory_info().rss
    for child in jvm.children(recursive=True):
        try:
            rss += child.memory_info().rss
        except psutil.Error:
            continue
    logs = sum(p.stat().st_size for p in [server.log_file, *server.event_log_dir.rglob("*")] if p.is_file())
    return {"pid": pid, "threads": len(os.listdir(f"/proc/{pid}/task")), "rss_mb": round(rss / 2**20, 1),
            "open_files": len(os.listdir(f"/proc/{pid}/fd")), "sessions": sessions(),
            "log_mb": round(logs / 2**20, 2), "idle_worker_monitors": server.idle_worker_monitors()}


def flatness(samples: list[dict], warmup: int = WARMUP_WINDOWS) -> dict[str, float | None]:
    """Per metric, after the warm-up: the largest value of the second half over the largest of the
    first (1.0: no growth; a metric that grows with the windows shows it however it oscillates)."""
    out: dict[str, float | None] = {}
    for metric in METRICS:
        values = [s[metric] for s in samples[warmup:] if s[metric] is not None]
        if len(values) < 10:
            out[metric] = None
            continue
        first, second = values[:len(values) // 2], values[len(values) // 2:]
        out[metric] = round(max(second) / max(first), 3) if max(first) else None
    return out


def plot(samples: list[dict], path: Path, warmup: int = WARMUP_WINDOWS) -> None:
    # Deferred: matplotlib (half a second to import) draws only this figure, after an endurance run.
    import matplotlib

    matplotlib.use("Agg")  # no display: the figure only goes to a file
    import matplotlib.pyplot as plt  # deferred: after the backend is chosen, as above

    fig, axes = plt.subplots(len(METRICS), 1, figsize=(9, 10), sharex=True)
    xs = [s["window"] for s in samples]
    for ax, metric in zip(axes, METRICS, strict=True):
        ax.plot(xs, [s[metric] if s[metric] is not None else float("nan") for s in samples], lw=1)
        ax.axvline(warmup, color="grey", ls=":", lw=1)
        ax.set_ylabel(metric.replace("_", " "))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("window")
    fig.suptitle(f"One Spark Connect server over {len(samples)} windows (dotted: end of warm-up)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_endurance(lab: Lab, windows: int = 500, *, out_dir: Path, records_per_window: int = 40) -> TrialResult:
    server = lab.connect
    with trial("connect_endurance", f"{windows} windows") as result:
        shop = lab.make_shop(2, name="endurance")
        samples: list[dict] = []
        sessions = SessionCount(server.event_log_dir)
        t0 = time.monotonic()
        for window in range(1, windows + 1):
            stats = generate(shop.connection, shop.topics.purchases, records_per_window, invalid_share=0.05,
                             seed=window)
            result.records += stats.produced
            started = time.monotonic()
            server.ensure_running()
            lab.recover(shop, ["--chunk-records", "200"], env=server.client_env())
            samples.append({"window": window, "seconds": round(time.monotonic() - started, 2),
                            **sample(server, sessions)})
            if window % 50 == 0:
                log.info("endurance: %d windows in %.0fs, last %s", window, time.monotonic() - t0, samples[-1])
        restarts = len({s["pid"] for s in samples}) - 1
        flat = flatness(samples)
        data_file = paths.var_dir() / "soak" / "connect_endurance.json"
        data_file.parent.mkdir(parents=True, exist_ok=True)
        data_file.write_text(json.dumps({"flatness": flat, "restarts": restarts, "samples": samples}, indent=1))
        plot(samples, out_dir / "connect_endurance.png")
        for metric, ratio in flat.items():
            if ratio is not None and ratio > FLAT_RATIO:
                result.violations[f"{metric}_grew_{ratio}x"] = 1
        if restarts:
            result.violations["server_restarted"] = restarts
        seconds = [s["seconds"] for s in samples]
        result.detail = (f"{windows} windows on one server (pid {samples[0]['pid']}, {restarts} restarts), "
                         f"median {statistics.median(seconds):.1f}s per window; after {WARMUP_WINDOWS} windows of "
                         f"warm-up, largest / level: " + ", ".join(f"{m} {r}x" for m, r in flat.items()) +
                         f"; at the end: {samples[-1]['threads']} threads, {samples[-1]['rss_mb']} MB, "
                         f"{samples[-1]['open_files']} files, {samples[-1]['sessions']} sessions, "
                         f"{samples[-1]['log_mb']} MB of logs")
        lab.judge(result, shop)
    return result
