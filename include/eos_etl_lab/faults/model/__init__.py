"""A randomized operation soak, in the style of Jepsen's Kafka workload; this module runs it.

A seeded generator (:func:`~.history.draw_history`, ``random.Random(seed)``) draws a history of
operations and faults against the real pipeline on a real broker: purchases produced (committed,
aborted, invalid), windows run, runs crashed at a failpoint or signalled, two runs of one window at
once, ``plan-window`` during a run, a replay of a planned window, ``offsets restore``, input
partitions added, the input topic deleted and re-created, its records deleted (retention) below or
beyond the pipeline's position, the consumer group deleted, the broker restarted or paused under a
run, the group's offsets left to expire (the private broker keeps them one minute); and who may
commit a partition (docs/pipeline-identity.md): the group's offsets written by hand with Kafka's
own API (any value in the log, no metadata), a run of another ``--writer-slots`` or
``--transactional-id-prefix`` racing the scheduled one, a run SIGSTOPped at a drawn log line and
resumed after the scheduled run finished, input partitions added between ``plan-window`` and the
run of its window, a run of the same group with another prefix; and, with a Spark Connect server,
every run on either route (``route=local``: a spark-submit of its own; ``route=connect``: a client
of the server) and the server killed under a run.
:func:`~.executor.execute` runs a history on fresh topics and judges it after every step:

* safety, by the independent checker (:mod:`eos_etl.checker`): nothing committed without its
  outputs (unless a run stopped with exit 2 naming the partition), no duplicate, no torn pair, no
  output of an aborted input, nothing beyond the commit;
* every exit code as the contract says (:mod:`eos_etl.errors`): 0 done; 1 the world failed, a
  retry may help; 2 the operator must act, with one ``error:`` line naming the command that
  recovers; exit 2 only where the operator really must act (the input topic was replaced);
* per operation: ``plan-window`` writes and fences nothing (the run it overlaps is not fenced);
  a run after the input topic was re-created, or after records it had not processed were
  deleted, stops with exit 2 naming the partition; offsets written by hand are where the next
  window starts (a range reset backwards is published again, judged from the outputs written
  since); a run whose settings disagree with the pipeline's identity is refused (exit 2, nothing
  moved) or publishes nothing; a paused run resumed publishes nothing more;
* liveness, once the faults healed: at most :data:`~.executor.RETRIES` runs (exit 1 retried, the
  named command of an exit 2 run first) bring the committed offsets level with the input's end, and
  the checker is exact.

A failing history is shrunk (:func:`shrink`: cut after the step that first failed, then delta
debugging, chunks then single operations removed; each candidate re-run on fresh topics, a racy
one up to ``repeats`` times) to the shortest that still shows the first violation's kind, and
printed as a numbered list with its seed (:func:`~.history.describe`).

The modules: :mod:`.registry` (what an operation is, the registry of kinds), :mod:`.harness` (a
history's topics, model and judge), :mod:`.operations` (what each kind does, registered),
:mod:`.pause_hook` (a run that SIGSTOPs itself after its Nth log line),
:mod:`.history` (the generator), :mod:`.executor`, :mod:`.shrinker`, :mod:`.report` (the printed
histories, the result rows, the model section of docs/reliability.md), :mod:`.options`.
"""

from __future__ import annotations

import logging
import shutil
import time

from eos_etl import paths
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.host.ports import free_port
from eos_etl.kafka.connection import KafkaConnection

from ..lab import Lab
from ..soak import CONNECT_MASTER, SHORT_RETENTION, save_results
from .executor import RETRIES, History, execute
from .harness import parse_recovery_command
from .history import ROUTES, describe, draw_history, draw_op
from .operations import BROKER_OPS, CONNECT_OPS, OPERATIONS, RUN_OPS, WEIGHTS
from .options import ModelSoakOptions
from .outcome import Outcome, Violation
from .registry import Op
from .report import as_trials, classify, ops_json, report_history, write_markdown
from .shrinker import shortest_failing

__all__ = ["BROKER_OPS", "CONNECT_OPS", "OPERATIONS", "RETRIES", "ROUTES", "RUN_OPS", "WEIGHTS", "History",
           "ModelSoakOptions", "Op", "Outcome", "Violation", "as_trials", "classify", "describe", "draw_history",
           "draw_op", "execute", "ops_json", "parse_recovery_command", "report_history", "run_histories",
           "run_model_soak", "shrink", "write_markdown"]

log = logging.getLogger(__name__)


def shrink(lab: Lab, failing: Outcome, *, budget: int = 8, repeats: int = 1) -> Outcome:
    """The shortest history that still shows ``failing``'s first violation kind, each candidate executed
    on fresh topics of ``lab`` (:func:`~.shrinker.shortest_failing`)."""
    return shortest_failing(failing, lambda ops: execute(lab, failing.seed, failing.partitions, ops),
                            budget=budget, repeats=repeats)


def run_histories(lab: Lab, opts: ModelSoakOptions, on_done=None) -> list[tuple[Outcome, Outcome | None]]:
    """Every seed's history, executed and judged; a failing one shrunk: [(outcome, shortest failing)]."""
    done = []
    for seed in opts.seeds:
        partitions, ops = draw_history(seed, opts.length, broker_ops=opts.broker_ops and lab.broker is not None,
                                       connect=lab.connect is not None)
        log.info("%s", describe(seed, partitions, ops))
        outcome = execute(lab, seed, partitions, ops)
        shortest = None
        if outcome.violations and opts.shrink_budget:
            shortest = shrink(lab, outcome, budget=opts.shrink_budget, repeats=opts.shrink_repeats)
        done.append((outcome, shortest))
        print(report_history(outcome, shortest), flush=True)
        if on_done is not None:
            on_done(done)
    return done


def run_model_soak(opts: ModelSoakOptions, on_done=None) -> tuple[list[tuple[Outcome, Outcome | None]], float]:
    """Every seed on a private broker under var/soak-model (restarted, paused and killed freely; it
    deletes a group's offsets a minute after their last commit), with ``opts.connect`` a Spark
    Connect server of its own there too."""
    root = paths.var_dir() / "soak-model"
    shutil.rmtree(root / "kafka", ignore_errors=True)
    broker = KafkaCluster(home=root / "kafka", port=free_port(), overrides=SHORT_RETENTION)
    broker.start()
    lab = Lab(KafkaConnection(broker.bootstrap_servers), broker=broker if opts.broker_ops else None,
              log_dir=root / "logs")
    if opts.connect:
        try:
            lab.connect = SparkConnectServer(home=root / "spark-connect", port=free_port(),
                                             master=CONNECT_MASTER).start()
        except BaseException:
            broker.stop()
            raise
    t0 = time.monotonic()
    results = paths.var_dir() / "soak-model" / "results.json"

    def progress(done_so_far):
        save_results(as_trials(done_so_far), time.monotonic() - t0, results)
        if on_done is not None:
            on_done(done_so_far)

    try:
        done = run_histories(lab, opts, progress)
    finally:
        if lab.connect is not None:
            lab.connect.stop()
        broker.stop()
    return done, time.monotonic() - t0
