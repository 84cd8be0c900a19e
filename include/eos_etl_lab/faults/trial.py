"""One fault trial, shared by every scenario family (broker, Spark, Connect, cluster, network
partitions): the trial's result and its timing, fresh topics with purchases, a failpoint that fires
once, the faulted run's verdict, and :class:`FaultTrial`, the skeleton the families' trials follow."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

from eos_etl.shop.generator import generate
from eos_etl.shop.settings import ShopSettings

from .clear_failure import CLEAR_EXITS, failed_clearly
from .job_process import JobProcess
from .lab import Lab, TrialResult

log = logging.getLogger(__name__)

#: A faulted run finishes or fails with one clear error within this many seconds of
#: the fault: a dead node's clients fail over within seconds; the publisher's
#: retry deadline is 60 s, the stall watchdog 150 s (transaction timeout + 30 s).
RUN_BOUND_S = 240.0
#: How long the job may take to reach its failpoint (Spark start-up, reading): not a fault bound,
#: only generous for a loaded 2-core machine.
FAILPOINT_WAIT_S = 600.0


@contextmanager
def trial(scenario: str, name: str):
    """The :class:`TrialResult` of one trial; an exception of the harness becomes its ``error``."""
    result = TrialResult(scenario=scenario, trial=name)
    t0 = time.monotonic()
    log.info("trial %s/%s: start", scenario, name)
    try:
        yield result
    except Exception as exc:  # noqa: BLE001 - a broken trial is a failed trial, reported, not a crashed soak
        log.exception("trial %s/%s could not be carried out", scenario, name)
        result.error = f"{type(exc).__name__}: {exc}"[:500]
    result.seconds = round(time.monotonic() - t0, 1)
    log.info("trial %s/%s: %s in %.1fs violations=%s settled=%s %s", scenario, name,
             "ok" if result.ok else "FAILED", result.seconds, result.violations, result.lso_settled, result.detail)


def written(stats) -> int:
    """Records a generator run put in the log: committed and aborted ones."""
    return stats.produced + stats.aborted


def shop_with_purchases(lab: Lab, result: TrialResult, partitions: int, name: str, count: int, **generate_options):
    """Fresh topics with ``count`` purchases written (counted in ``result``); returns (shop, the input's ends)."""
    shop = lab.make_shop(partitions, name=name)
    result.records = written(generate(shop.connection, shop.topics.purchases, count, **generate_options))
    return shop, lab.input_ends(shop)


def once(tag: str) -> str:
    """Failpoint option making it fire in one process, once: a resumed or retried attempt goes on."""
    return f"once={tempfile.gettempdir()}/eos-etl-failpoint-{tag}-{uuid.uuid4().hex}"


def wait_faulted_run(lab: Lab, result: TrialResult, job: JobProcess, t_fault: float, bound_s: float,
                     name: str) -> int | None:
    """Wait for the faulted run within ``bound_s`` of the fault; a run still going then is a hang. It
    finishes (``recovery_s`` from the fault), or fails clearly (:mod:`.clear_failure`); its log is kept
    unless it finished."""
    code = job.wait(max(1.0, bound_s - (time.monotonic() - t_fault)))
    if code is None:
        result.hung = True
        job.kill()
        log.error("%s: run hung for %.0fs after the fault (log %s)", name, bound_s, lab.keep_log(job, f"{name}-hung"))
    elif code == 0:
        result.recovery_s = round(time.monotonic() - t_fault, 1)
    elif code in CLEAR_EXITS:
        if not failed_clearly(code, job.stderr):  # not exactly one error line, or a traceback
            result.violations["no_clear_error"] = 1
        lab.keep_log(job, f"{name}-failed")
    else:  # killed by a signal, or an exit code no diagnosed error has
        result.violations["unclear_failure"] = 1
        lab.keep_log(job, f"{name}-exit{code}")
    return code


@dataclass(kw_only=True)
class FaultTrial:
    """One fault trial as the scenario families run it: the skeleton (:meth:`run`), and the steps a
    family fills in (a subclass), each scenario giving its parameters (its failpoint, its fault).

    :meth:`run`, within :func:`trial`: :meth:`prepare` the lab; fresh topics with ``records``
    purchases; the faulted run started (``failpoint``, made to fire once; ``run_extra``; the
    environment of :meth:`job_env`); :meth:`reach` (by default: until the run stopped itself at its
    failpoint); :meth:`inject` the fault (it sets ``t_fault`` and counts ``result.kills``);
    :meth:`finish` (by default: :func:`wait_faulted_run` within ``bound_s`` of the fault). Whatever
    happened, the faulted run is killed if it still runs and :meth:`release` undoes what must not
    outlive it. Then :meth:`heal` the lab; :meth:`retry` (by default: a clean run when the faulted
    one did not finish, ``recovery_s`` from the fault); ``result.detail`` from :meth:`describe`;
    :meth:`judge` (by default: the independent checker, :meth:`Lab.judge`).
    """

    lab: Lab
    scenario: str
    seed: int
    #: Where the faulted run stops or sleeps (``point=action,...``; "" none), made to fire once if ``fire_once``.
    failpoint: str = ""
    fire_once: bool = True
    extra: list[str] = field(default_factory=list)  # every run's options (the retry's)
    run_extra: list[str] | None = None  # the faulted run's, where they differ
    records: int = 3000
    partitions: int = 2
    purchases: dict = field(default_factory=lambda: {"invalid_share": 0.05, "transaction_size": 250,
                                                     "abort_share": 0.1})
    name: str = ""  # the trial's ("": seed=N)
    shop_name: str = ""  # its topics' ("": the scenario's, dashed)
    reach_s: float = FAILPOINT_WAIT_S
    bound_s: float = RUN_BOUND_S  # from the fault to the faulted run's end
    # What the trial found, step by step.
    result: TrialResult | None = field(init=False, default=None)
    shop: ShopSettings | None = field(init=False, default=None)
    ends: dict[int, int] | None = field(init=False, default=None)
    env: dict | None = field(init=False, default=None)
    job: JobProcess | None = field(init=False, default=None)
    t_fault: float = field(init=False, default=0.0)
    code: int | None = field(init=False, default=None)
    recovery: JobProcess | None = field(init=False, default=None)

    def run(self) -> TrialResult:
        with trial(self.scenario, self.name or f"seed={self.seed}") as result:
            self.result = result
            self.prepare()
            self.shop, self.ends = shop_with_purchases(self.lab, result, self.partitions,
                                                       self.shop_name or self.scenario.replace("_", "-"),
                                                       self.records, seed=self.seed, **self.purchases)
            self.env = self.job_env()
            extra = self.extra if self.run_extra is None else self.run_extra
            self.job = self.lab.job(self.shop, extra, failpoints=self.failpoints(), env=self.env).start()
            try:
                self.reach()
                self.inject()
                self.code = self.finish()
            finally:
                if self.job.alive:
                    self.job.kill()
                self.release()
            self.heal()
            self.retry()
            result.detail = self.describe()
            self.judge()
        return result

    def failpoints(self) -> str:
        if not self.failpoint:
            return ""
        return f"{self.failpoint},{once(self.scenario)}" if self.fire_once else self.failpoint

    # -- the steps a family fills in ---------------------------------------------------------------
    def prepare(self) -> None:
        """Before the trial's topics: the lab whole (every node, every worker running)."""

    def job_env(self) -> dict | None:
        """The environment of the trial's runs (None: the harness's own)."""
        return None

    def reach(self) -> None:
        if not self.job.wait_for_failpoint_stop(self.reach_s):
            raise RuntimeError(f"the job never reached {self.failpoint}:\n{self.job.tail()}")

    def inject(self) -> None:
        raise NotImplementedError

    def finish(self) -> int | None:
        """The faulted run's exit code (None: it hung and was killed)."""
        return wait_faulted_run(self.lab, self.result, self.job, self.t_fault, self.bound_s, self.scenario)

    def release(self) -> None:
        """What must not outlive the faulted run, undone even when the trial broke off."""

    def heal(self) -> None:
        """After the faulted run: the lab whole again for the retry."""

    def retry(self) -> None:
        if self.code != 0:
            self.recovery = self.lab.recover(self.shop, self.extra, env=self.env)
            self.result.recovery_s = round(time.monotonic() - self.t_fault, 1)

    def describe(self) -> str:
        return ""

    def judge(self) -> None:
        self.lab.judge(self.result, self.shop, self.ends)
