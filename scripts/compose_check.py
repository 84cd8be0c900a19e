"""`make compose-check`: docker-compose.yaml for real, from nothing to `down -v`, every phase timed.

What it does, in order (each phase prints its time; the first failure stops the check, shows the
stack's state and logs, and still cleans up):

  tools     docker.io, docker-compose and debootstrap from Debian's packages when missing (root),
            the browser for the UI phase (scripts/install_browser.sh)
  engine    a Docker engine: the running one, or `dockerd` started here (and stopped at the end;
            an engine that was already running is left alone)
  base      the Debian base image, made with debootstrap from this machine's apt mirror
            (scripts/make_debian_base.sh); nothing is pulled from any registry
  env       `.env` (make compose-env), this machine's extra CA certificates as a build input
            (docker/ca-certificates/), free loopback ports for the two published ports
  build     every image (`compose build`)
  up        `compose up -d`, then every healthcheck healthy and every one-shot exited 0
  topics    the shop's topics, as kafka-init made them, seen from the host through the published
            SASL_SSL listener as the pipeline's own login `etl`
  scheduled purchases stamped 2.5 hours and 30 minutes back (in time order); the DAG unpaused
            through the REST API: the scheduler's run of the latest hour publishes them all
  backfill  a backfill through the REST API over the three hours before: each run finds its window
            empty (everything was published once), nothing is published twice
  checker   the project's exactly-once checker against the compose Kafka (from the host): exact
  ui        the browser logs in on the published port, opens the scheduled run's report (the
            plugin's tab in the Airflow UI) and its Great Expectations Data Docs
  kill      a run triggered through the REST API; mid-window (its transactions open), the Spark
            Connect container is killed (SIGKILL to its init): Docker's restart policy starts it
            again, Airflow retries run_window, the checker finds everything exactly once
  spark-submit
            the other route: EOS_ETL_SPARK_CONNECT_CONN_ID emptied, the Airflow containers
            recreated, a triggered run's window is a spark-submit to the standalone master (its
            executors in the worker's container publish); the checker again
  down      `compose down -v` (containers, network, volumes; the images stay for the next run)

Runs as its own Compose project (`eos-etl-check`), so a stack of the default project on this
machine is never touched. Secrets come from `.env` and are never printed.

Usage: python scripts/compose_check.py [--keep] [--purchases N] [--kill-purchases N] [--only PHASES]
  --keep   leave the stack (and an engine started here) running at the end, for a look around
  --only   development: run just these phases against a stack an earlier --keep left up
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))
from eos_etl.embedded.airflow_rest import AirflowRestClient  # noqa: E402 - the package is on the path only now

PROJECT = "eos-etl-check"
BASE_IMAGE = "eos-etl-base:bookworm"
IMAGES = {"airflow": "eos-etl-airflow:local", "spark": "eos-etl-spark:local", "kafka": "eos-etl-kafka:local",
          "postgres": "eos-etl-postgres:local"}
DAG_ID = "shop_invoicing"
ONE_SHOT = {"tls-init", "kafka-init", "airflow-init"}
CHROMIUM = os.environ.get("EOS_ETL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-proxy-server"]
HOST_CAS = Path("/usr/local/share/ca-certificates")
UP_TIMEOUT_S = 900
RUN_TIMEOUT_S = 900


class CheckFailed(Exception):
    """A phase found something wrong: one line that says what."""


def say(text: str) -> None:
    print(f"[compose-check] {text}", flush=True)


def run(cmd: list[str], *, env: dict | None = None, check: bool = True, capture: bool = False,
        timeout: float | None = None, quiet: bool = False) -> subprocess.CompletedProcess:
    """A command of this check (never one that carries a secret on its command line)."""
    if not quiet:
        say("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, env=env, cwd=ROOT, text=True, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "")[-3000:] if capture else ""
        raise CheckFailed(f"`{' '.join(cmd)}` exited with {proc.returncode}{': ' + detail if detail else ''}")
    return proc


def dotenv(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", line)
        if m and not line.lstrip().startswith("#"):
            values[m.group(1)] = m.group(2).strip().strip("'\"")
    return values


# -- tools and engine ---------------------------------------------------------------------------
def compose_command() -> list[str]:
    """Compose v2 (`docker compose`) when installed, else v1 (`docker-compose`)."""
    forced = os.environ.get("EOS_ETL_COMPOSE")
    if forced:
        return forced.split()
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"]


def ensure_tools() -> None:
    missing = [pkg for tool, pkg in (("dockerd", "docker.io"), ("docker-compose", "docker-compose"),
                                     ("debootstrap", "debootstrap")) if not shutil.which(tool)]
    if shutil.which("docker") is None and "docker.io" not in missing:
        missing.append("docker.io")
    if "docker-compose" in missing and shutil.which("docker") and \
            subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        missing.remove("docker-compose")  # Compose v2 is there
    if missing:
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            raise CheckFailed(f"missing {', '.join(missing)}: install them (Debian/Ubuntu as root: "
                              f"apt-get install {' '.join(missing)})")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run(["apt-get", "update", "-qq"], env=env, capture=True)
        run(["apt-get", "install", "-y", "-qq", *missing], env=env, capture=True)
    run(["bash", str(ROOT / "scripts" / "install_browser.sh")])


class Engine:
    """The Docker engine: the running one, or a `dockerd` started (and later stopped) here."""

    def __init__(self, log_file: Path):
        self.log_file = log_file
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def answers() -> bool:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0

    def ensure(self) -> None:
        if self.answers():
            say("a Docker engine is running: using it (it stays running)")
            return
        if os.geteuid() != 0:
            raise CheckFailed("no Docker engine answers and only root can start dockerd here")
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise CheckFailed(f"dockerd did not start; its log: {self.log_file}")
            time.sleep(0.5)
        say(f"started dockerd (pid {self.proc.pid}, log {self.log_file}); it is stopped at the end")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # dockerd stops its containers first
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        say(f"stopped the dockerd started here (pid {self.proc.pid})")


# -- the stack ----------------------------------------------------------------------------------
class Stack:
    def __init__(self, env: dict[str, str], secrets: dict[str, str]):
        self.compose = compose_command()
        self.env = env
        self.secrets = secrets
        self.api_url = f"http://127.0.0.1:{env['AIRFLOW_API_PORT']}"
        self.kafka_address = f"localhost:{env['KAFKA_EXTERNAL_PORT']}"
        self.rest = AirflowRestClient(self.api_url, "admin", secrets["AIRFLOW_ADMIN_PASSWORD"],
                                      password_source="AIRFLOW_ADMIN_PASSWORD in the compose secrets")
        self._token: tuple[str, float] | None = None

    def cmd(self, *args: str, check: bool = True, capture: bool = False, timeout: float | None = None,
            quiet: bool = False) -> subprocess.CompletedProcess:
        return run([*self.compose, *args], env=self.env, check=check, capture=capture, timeout=timeout, quiet=quiet)

    def containers(self) -> dict[str, dict]:
        """service -> `docker inspect` of its container (the first, for a scaled one)."""
        ids = self.cmd("ps", "-a", "-q", capture=True, quiet=True).stdout.split()
        if not ids:
            return {}
        found = json.loads(run(["docker", "inspect", *ids], capture=True, quiet=True).stdout)
        return {c["Config"]["Labels"].get("com.docker.compose.service"): c for c in found}

    def wait_healthy(self, timeout: float = UP_TIMEOUT_S) -> None:
        services = set(self.cmd("config", "--services", capture=True, quiet=True).stdout.split())
        deadline = time.monotonic() + timeout
        while True:
            state = self.containers()
            waiting, broken = [], []
            for name in sorted(services):
                c = state.get(name)
                if c is None:
                    waiting.append(f"{name} (no container)")
                    continue
                s = c["State"]
                if name in ONE_SHOT:
                    if s["Status"] == "exited":
                        if s["ExitCode"] != 0:
                            broken.append(f"{name} exited {s['ExitCode']}")
                    else:
                        waiting.append(f"{name} ({s['Status']})")
                else:
                    health = (s.get("Health") or {}).get("Status")
                    if s["Status"] != "running":
                        broken.append(f"{name} {s['Status']} (exit {s['ExitCode']})")
                    elif health != "healthy":
                        waiting.append(f"{name} ({health or 'no healthcheck'})")
            if broken:
                raise CheckFailed(f"not running: {', '.join(broken)}")
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise CheckFailed(f"not healthy after {timeout:.0f} s: {', '.join(waiting)}")
            time.sleep(3)

    def dump(self) -> None:
        """The stack's state and the logs of whatever is not fine (after a failure)."""
        self.cmd("ps", "-a", check=False)
        for name, c in self.containers().items():
            s = c["State"]
            fine = (s["Status"] == "exited" and s["ExitCode"] == 0) if name in ONE_SHOT else \
                (s["Status"] == "running" and (s.get("Health") or {}).get("Status") == "healthy")
            if not fine or name in ("airflow-scheduler", "spark-connect"):
                say(f"--- last log lines of {name} ({s['Status']}, health "
                    f"{(s.get('Health') or {}).get('Status')}) ---")
                self.cmd("logs", "--no-color", "--tail", "60", name, check=False)

    # -- Airflow's REST API ----------------------------------------------------------------------
    def token(self) -> str:
        if self._token is None or time.monotonic() - self._token[1] > 600:  # Airflow's tokens last longer
            self._token = (self.rest.token(), time.monotonic())
        return self._token[0]

    def api(self, method: str, path: str, body: dict | None = None, attempts: int = 5):
        """One call through the project's REST client (which asks an idempotent call again on HTTP
        500/503); an API server that does not answer at all is asked ``attempts`` times."""
        for attempt in range(attempts):
            try:
                return self.rest.call(method, path, body, self.token(), timeout=60)
            except urllib.error.HTTPError as exc:
                raise CheckFailed(f"{method} {path}: HTTP {exc.code} "
                                  f"{exc.read().decode(errors='replace')[:500]}") from exc
            except (urllib.error.URLError, OSError) as exc:
                if attempt == attempts - 1:
                    raise CheckFailed(f"{method} {path}: {exc}") from None
            time.sleep(2)

    def runs(self, run_type: str | None = None) -> list[dict]:
        query = f"?run_type={run_type}&order_by=logical_date" if run_type else "?order_by=logical_date"
        return self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns{query}")["dag_runs"]

    def task_states(self, run_id: str) -> dict[str, dict]:
        tis = self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id)}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti for ti in tis}

    def wait_for(self, what: str, done, timeout: float = RUN_TIMEOUT_S, every: float = 3.0):
        deadline = time.monotonic() + timeout
        while True:
            result = done()
            if result:
                return result
            if time.monotonic() > deadline:
                raise CheckFailed(f"{what}: not within {timeout:.0f} s")
            time.sleep(every)

    def wait_for_run(self, run_id: str) -> dict:
        def finished():
            run_ = self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id)}")
            return run_ if run_["state"] in ("success", "failed") else None
        run_ = self.wait_for(f"DAG run {run_id}", finished)
        if run_["state"] != "success":
            states = {t: ti["state"] for t, ti in self.task_states(run_id).items()}
            raise CheckFailed(f"DAG run {run_id} {run_['state']}: tasks {states}")
        return run_

    # -- Kafka from the host ---------------------------------------------------------------------
    def kafka_args(self, ca_file: Path) -> list[str]:
        return ["--bootstrap-servers", self.kafka_address, "--security-protocol", "SASL_SSL",
                "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "etl", "--ssl-ca-location", str(ca_file)]

    def connection(self, ca_file: Path):
        from eos_etl.kafka.connection import KafkaConnection

        return KafkaConnection(self.kafka_address, "SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="etl",
                               sasl_password=self.secrets["EOS_ETL_KAFKA_PASSWORD"], ssl_ca_location=str(ca_file))

    def generate(self, count: int, stamp: datetime | None, seed: int) -> dict:
        """Purchases written as the broker's super-user (kafka-init's network namespace)."""
        args = ["run", "--rm", "--no-deps", "-T", "kafka-init", "eos-etl", "generate", "--count", str(count),
                "--seed", str(seed), "--no-progress"]
        if stamp is not None:
            args += ["--timestamp", stamp.isoformat()]
        out = self.cmd(*args, capture=True).stdout
        return json.loads(out.strip().splitlines()[-1])


def quote(text: str) -> str:
    return urllib.request.quote(text, safe="")


def hour_floor(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


# -- phases ---------------------------------------------------------------------------------------
class Check:
    def __init__(self, args):
        self.args = args
        self.work = ROOT / "var" / "compose-check"
        self.work.mkdir(parents=True, exist_ok=True)
        self.engine = Engine(self.work / "dockerd.log")
        self.timings: list[tuple[str, float]] = []
        self.stack: Stack | None = None
        self.expected_published = 0  # every purchase written, each committed exactly once
        self.hour: datetime | None = None

    @contextlib.contextmanager
    def phase(self, name: str):
        say(f"== {name}")
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.timings.append((name, time.monotonic() - t0))
            say(f"== {name}: {self.timings[-1][1]:.1f} s")

    def main(self) -> int:
        started = time.monotonic()
        failed: str | None = None
        phases = [("tools", ensure_tools), ("engine", self.engine.ensure),
                  ("base", lambda: run(["bash", str(ROOT / "scripts" / "make_debian_base.sh"), BASE_IMAGE])),
                  ("env", self.prepare_env), ("build", self.build), ("up", self.up), ("topics", self.check_topics),
                  ("scheduled", self.scheduled_run), ("backfill", self.backfill),
                  ("checker", lambda: self.checker("after the scheduled run and the backfill")),
                  ("ui", self.ui), ("kill", self.kill_mid_window),
                  ("checker", lambda: self.checker("after the killed and retried window")),
                  ("spark-submit", self.spark_submit_route),
                  ("checker", lambda: self.checker("after the spark-submit route"))]
        if self.args.only:  # development: some phases against a stack kept by an earlier --keep
            wanted = self.args.only.split(",")
            self.stack = self.kept_stack()
            phases = [(name, step) for name, step in phases if name in wanted]
            self.expected_published = None
        try:
            for name, step in phases:
                with self.phase(name):
                    step()
        except CheckFailed as exc:
            failed = str(exc)
            say(f"FAILED: {failed}")
            if self.stack is not None:
                self.stack.dump()
        except KeyboardInterrupt:
            failed = "interrupted"
        except Exception as exc:  # noqa: BLE001 - a bug here still cleans up and says where it was
            import traceback

            traceback.print_exc()
            failed = f"{type(exc).__name__}: {exc}"
            if self.stack is not None:
                self.stack.dump()
        finally:
            if self.stack is not None and not self.args.keep:
                with self.phase("down"):
                    self.stack.cmd("down", "-v", "--remove-orphans", check=False)
            if not self.args.keep:
                self.engine.stop()
        say("phase timings:")
        for name, seconds in self.timings:
            say(f"  {name:<10} {seconds:7.1f} s")
        total = time.monotonic() - started
        if failed:
            say(f"compose-check FAILED after {total / 60:.1f} min: {failed}")
            return 1
        say(f"compose-check passed in {total / 60:.1f} min")
        if self.args.keep:
            say(f"the stack is still up (project {PROJECT}): UI {self.stack.api_url}; "
                f"stop it with: COMPOSE_PROJECT_NAME={PROJECT} {' '.join(self.stack.compose)} down -v")
        return 0

    @property
    def state_file(self) -> Path:
        return self.work / "state.json"

    def kept_stack(self) -> Stack:
        if not self.state_file.is_file():
            raise SystemExit("error: --only needs a stack kept by an earlier run with --keep")
        ports = json.loads(self.state_file.read_text())
        env = {**os.environ, "COMPOSE_PROJECT_NAME": PROJECT, "EOS_ETL_BASE_IMAGE": BASE_IMAGE,
               "EOS_ETL_PUBLISH_ADDRESS": "127.0.0.1", **ports}
        return Stack(env, dotenv(ROOT / ".env"))

    def build(self) -> None:
        self.stack.cmd("build")
        self.report_images()

    def up(self) -> None:
        self.stack.cmd("up", "-d")
        self.stack.wait_healthy()

    def prepare_env(self) -> Stack:
        from eos_etl.host.ports import free_port

        run([sys.executable, str(ROOT / "scripts" / "compose_env.py")])
        cas = sorted(HOST_CAS.glob("*.crt")) if HOST_CAS.is_dir() else []
        target = ROOT / "docker" / "ca-certificates"
        for ca in cas:
            shutil.copyfile(ca, target / ca.name)
        say(f"extra CA certificates for the build: {[c.name for c in cas] or 'none'}")
        ports = {"AIRFLOW_API_PORT": str(free_port()), "KAFKA_EXTERNAL_PORT": str(free_port())}
        say(f"published on 127.0.0.1: Airflow {ports['AIRFLOW_API_PORT']}, Kafka {ports['KAFKA_EXTERNAL_PORT']}")
        env = {**os.environ, "COMPOSE_PROJECT_NAME": PROJECT, "EOS_ETL_BASE_IMAGE": BASE_IMAGE,
               "EOS_ETL_PUBLISH_ADDRESS": "127.0.0.1", **ports}
        self.state_file.write_text(json.dumps(ports))
        self.stack = stack = Stack(env, dotenv(ROOT / ".env"))
        say(f"compose: {' '.join(stack.compose)} "
            f"({run([*stack.compose, 'version', '--short'], capture=True, quiet=True).stdout.strip()})")
        stack.cmd("config", "-q")
        stack.cmd("down", "-v", "--remove-orphans", check=False)  # what an interrupted earlier check left
        return stack

    def report_images(self) -> None:
        for image in {"base": BASE_IMAGE, **IMAGES}.values():
            size = json.loads(run(["docker", "image", "inspect", image], capture=True, quiet=True).stdout)[0]["Size"]
            say(f"image {image}: {size / 1e6:.0f} MB")

    def ca_file(self) -> Path:
        path = self.work / "ca.pem"
        if not path.is_file():
            pem = self.stack.cmd("exec", "-T", "airflow-scheduler", "cat", "/opt/eos-etl/ca/ca.pem",
                                 capture=True, quiet=True).stdout
            path.write_text(pem)
        return path

    def check_topics(self) -> None:
        from eos_etl.kafka.admin import ClusterAdmin
        from eos_etl.shop.schema import ShopTopics

        (self.work / "ca.pem").unlink(missing_ok=True)  # this stack's CA, not an earlier one's
        admin = ClusterAdmin(self.stack.connection(self.ca_file()))
        for topic in (t := ShopTopics()).purchases, t.invoices, t.shipments, t.dead_letters:
            partitions = admin.partitions(topic)
            say(f"topic {topic}: {len(partitions)} partitions")
            if not partitions:
                raise CheckFailed(f"topic {topic} has no partitions")

    def _expect(self, stats: dict) -> None:
        if self.expected_published is not None:
            self.expected_published += stats["produced"]

    def summary(self, run_id: str) -> dict | None:
        """The run_window task's return value (the window's run summary), None when it did not run."""
        if self.stack.task_states(run_id).get("run_window", {}).get("state") != "success":
            return None
        value = self.stack.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id)}/taskInstances/run_window/"
                                      "xcomEntries/return_value?deserialize=true")["value"]
        return json.loads(value) if isinstance(value, str) else value

    def scheduled_run(self) -> dict:
        """History, then the schedule: purchases stamped 2.5 hours back, then 30 minutes back, in
        that order (a window ends at the first record stamped at or after its end, so the log is
        written in time order); unpausing the DAG makes the scheduler start the run of the latest
        hour, whose window is everything before it."""
        hour = hour_floor(datetime.now(timezone.utc))
        count = 0
        for stamp, share, seed in ((hour - timedelta(minutes=150), 2, 101), (hour - timedelta(minutes=30), 1, 102)):
            n = max(1, self.args.purchases // share)
            stats = self.stack.generate(n, stamp, seed=seed)
            self._expect(stats)
            count += n
            say(f"{n} purchases stamped {stamp:%H:%M} UTC: {stats['valid']} valid, {stats['invalid_total']} invalid")
        self.stack.wait_for(f"{DAG_ID} parsed", lambda: self._unpause(), timeout=300)
        run_ = self.stack.wait_for("the scheduled run", lambda: next(iter(self.stack.runs("scheduled")), None))
        say(f"unpaused through the REST API: scheduled run {run_['dag_run_id']}")
        self.stack.wait_for_run(run_["dag_run_id"])
        summary = self.summary(run_["dag_run_id"])
        read = summary["records_read"] if summary else 0
        say(f"scheduled run: read {read}, published {summary and summary['invoices']} invoices, "
            f"{summary and summary['dead_letters']} dead letters")
        if read != count:
            raise CheckFailed(f"the scheduled run read {read} purchases, not {count}")
        self.require_route(run_["dag_run_id"], "WindowSparkConnectOperator")
        self.hour = datetime.fromisoformat(run_["logical_date"].replace("Z", "+00:00"))
        return run_

    def require_route(self, run_id: str, operator: str) -> None:
        used = self.stack.task_states(run_id)["run_window"]["operator"]
        if used != operator:
            raise CheckFailed(f"run_window of {run_id} ran as {used}, not {operator}")
        say(f"run_window of {run_id} ran as {used}")

    def _unpause(self) -> bool:
        try:
            self.stack.api("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}, attempts=1)
            return True
        except CheckFailed:
            return False  # not parsed yet

    def backfill(self) -> None:
        """A backfill through the REST API over the three hours before the scheduled run's, the
        hours its purchases were stamped in: every run plans an empty window (the scheduled run
        published them), nothing is published twice."""
        hour = getattr(self, "hour", None) or hour_floor(datetime.now(timezone.utc))
        body = {"dag_id": DAG_ID, "from_date": (hour - timedelta(hours=3)).isoformat(),
                "to_date": (hour - timedelta(hours=1)).isoformat(), "reprocess_behavior": "none",
                "max_active_runs": 1}
        backfill = self.stack.api("POST", "/api/v2/backfills", body)
        say(f"backfill {backfill['id']} through the REST API: {body['from_date']} .. {body['to_date']}")

        def completed():
            b = self.stack.api("GET", f"/api/v2/backfills/{backfill['id']}")
            return b if b.get("completed_at") else None
        self.stack.wait_for(f"backfill {backfill['id']}", completed)
        runs = [r for r in self.stack.runs("backfill") if r.get("backfill_id") in (None, backfill["id"])]
        if len(runs) != 3:
            raise CheckFailed(f"backfill {backfill['id']} made {len(runs)} runs, not 3 (one per hour)")
        for run_ in runs:
            self.stack.wait_for_run(run_["dag_run_id"])
            states = {t: ti["state"] for t, ti in self.stack.task_states(run_["dag_run_id"]).items()}
            say(f"backfill run {run_['dag_run_id']}: {states}")
            if states.get("run_window") != "skipped":  # has_new_records found the window empty
                summary = self.summary(run_["dag_run_id"])
                raise CheckFailed(f"backfill run {run_['dag_run_id']} ran a window: {summary}")

    def checker(self, when: str) -> None:
        from eos_etl.kafka.admin import ClusterAdmin
        from eos_etl.shop.schema import ShopTopics

        connection = self.stack.connection(self.ca_file())
        admin = ClusterAdmin(connection)
        topic = ShopTopics().purchases
        ends = {p: o.high_watermark for p, o in admin.offsets(topic, admin.partitions(topic)).items()}
        env = {**os.environ, "EOS_ETL_KAFKA_PASSWORD": self.stack.secrets["EOS_ETL_KAFKA_PASSWORD"]}
        proc = run([sys.executable, "-m", "eos_etl", "check", *self.stack.kafka_args(self.ca_file()),
                    "--expected-ends", json.dumps(ends)], env=env, capture=True, check=False)
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            raise CheckFailed(f"the checker printed no report: {proc.stderr[-2000:]}") from None
        (self.work / "checker.json").write_text(json.dumps(report, indent=2))
        outputs = report.get("outputs", {})
        committed = sum(p["committed_inputs"] for p in report["partitions"].values())
        say(f"checker {when}: ok={report['ok']} violations={report['violations']} outputs={outputs} "
            f"committed inputs {committed} (purchases written: {self.expected_published})")
        if proc.returncode != 0 or not report["ok"]:
            raise CheckFailed(f"the checker found violations {when}: {report['violations']} "
                              "(var/compose-check/checker.json)")
        if self.expected_published is not None and committed != self.expected_published:
            raise CheckFailed(f"{committed} committed inputs {when}, expected {self.expected_published}")

    def ui(self) -> None:
        from playwright.sync_api import expect, sync_playwright

        shots = self.work / "screenshots"
        shots.mkdir(exist_ok=True)
        url, run_id = self.stack.api_url, self.stack.runs("scheduled")[0]["dag_run_id"]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            expect.set_options(timeout=30_000)
            try:
                if browser.new_page().goto(f"{url}/eos-etl/runs/{DAG_ID}/{quote(run_id)}").status != 401:
                    raise CheckFailed("the run report answered without a login")
                page.goto(url)
                page.wait_for_url(re.compile(r"/auth/login"))
                page.get_by_label("Username").fill("admin")
                page.get_by_label("Password").fill(self.stack.secrets["AIRFLOW_ADMIN_PASSWORD"])
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(lambda u: "/auth/login" not in u)
                page.screenshot(path=shots / "01-home.png")

                # The run's "Run report" tab in the Airflow UI (the plugin's page in an iframe).
                page.goto(f"{url}/dags/{DAG_ID}/runs/{quote(run_id)}")
                page.get_by_role("link", name="Run report").click()
                report = page.frame_locator("iframe[title='Run report']").locator("body")
                expect(report).to_contain_text(run_id)
                expect(report).to_contain_text("verdict passed")
                page.screenshot(path=shots / "02-run-report-tab.png")

                # The report page itself, then its Data Docs.
                page.goto(f"{url}/eos-etl/runs/{DAG_ID}/{quote(run_id)}")
                expect(page.get_by_test_id("verdict")).to_have_text("passed")
                expect(page.get_by_test_id("expectations")).to_contain_text("expect_")
                page.get_by_test_id("data-docs-link").click()
                page.wait_for_url(re.compile(r"/eos-etl/data-docs/"))
                expect(page.locator("nav.navbar").first).to_have_css("display", "flex")
                expect(page.locator(".bootstrap-table").first).to_be_attached()
                page.screenshot(path=shots / "03-data-docs.png", full_page=True)
            except CheckFailed:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of the page: its screenshot, then one line
                page.screenshot(path=shots / "failure.png", full_page=True)
                raise CheckFailed(f"UI: {type(exc).__name__}: {str(exc).splitlines()[0]} "
                                  f"(screenshots in {shots})") from None
            finally:
                browser.close()
        say(f"UI: logged in, run report 'passed' and Data Docs shown (screenshots in {shots})")

    def kill_mid_window(self) -> None:
        """A run triggered through the REST API; while its window's transactions are open, the
        Spark Connect container is killed. The run that was mid-window (the triggered one, or a
        scheduled one if an hour began meanwhile) must succeed in a later try of run_window."""
        from eos_etl.kafka.admin import ClusterAdmin
        from eos_etl.shop.schema import ShopTopics

        count = self.args.kill_purchases
        stats = self.stack.generate(count, None, seed=103)
        self._expect(stats)
        say(f"{count} purchases for the window that is killed: {stats['valid']} valid, "
            f"{stats['invalid_total']} invalid")
        restarts = self.stack.containers()["spark-connect"]["RestartCount"]
        triggered = self.stack.api("POST", f"/api/v2/dags/{DAG_ID}/dagRuns",
                                   {"logical_date": None, "note": "compose-check: Spark Connect killed mid-window"})
        say(f"triggered {triggered['dag_run_id']} through the REST API")
        admin = ClusterAdmin(self.stack.connection(self.ca_file()))
        outputs = ShopTopics().invoices

        def open_transaction():
            offsets = admin.offsets(outputs, admin.partitions(outputs))
            return any(o.high_watermark > o.last_stable for o in offsets.values())
        self.stack.wait_for("an open transaction of the window", open_transaction, timeout=600, every=0.2)
        pid = self.stack.containers()["spark-connect"]["State"]["Pid"]
        in_flight = [r["dag_run_id"] for r in self.stack.runs() if r["state"] == "running"
                     and self.stack.task_states(r["dag_run_id"]).get("run_window", {}).get("state") == "running"]
        os.kill(pid, signal.SIGKILL)  # its init: the kernel ends every process of the container
        say(f"killed the spark-connect container mid-window (SIGKILL to its init, host pid {pid})")
        if len(in_flight) != 1:
            raise CheckFailed(f"expected one run with run_window running at the kill, found {in_flight}")
        killed = in_flight[0]

        def restarted():
            c = self.stack.containers()["spark-connect"]
            healthy = (c["State"].get("Health") or {}).get("Status") == "healthy"
            return c if c["RestartCount"] > restarts and healthy else None
        t0 = time.monotonic()
        self.stack.wait_for("spark-connect restarted by its restart policy and healthy", restarted, timeout=300,
                            every=1.0)
        say(f"spark-connect is back (restart policy) and healthy after {time.monotonic() - t0:.0f} s")
        for run_id in dict.fromkeys([killed, triggered["dag_run_id"]]):
            self.stack.wait_for_run(run_id)
        ti = self.stack.task_states(killed)["run_window"]
        summary = self.summary(killed)
        say(f"run {killed}: success; run_window try {ti['try_number']} read {summary['records_read']}")
        if ti["try_number"] < 2:
            raise CheckFailed(f"run_window of {killed} succeeded in try {ti['try_number']}: the kill missed it")
        if summary["records_read"] != count:
            raise CheckFailed(f"the retried window read {summary['records_read']} purchases, not {count}")


    def spark_submit_route(self) -> None:
        """The alternative route: EOS_ETL_SPARK_CONNECT_CONN_ID empty, Compose recreates the Airflow
        containers, and a triggered run's window is a spark-submit to the standalone master whose
        executors, in the worker's container, publish to Kafka (`kafka:9093`)."""
        self.stack.env["EOS_ETL_SPARK_CONNECT_CONN_ID"] = ""
        self.stack.cmd("up", "-d")
        self.stack.wait_healthy()
        count = self.args.purchases
        stats = self.stack.generate(count, None, seed=104)
        self._expect(stats)

        def reparsed():  # the DAG processor parsed the DAG again, in its new environment
            task = self.stack.api("GET", f"/api/v2/dags/{DAG_ID}/tasks/run_window")
            return task["operator_name"] == "WindowSparkSubmitOperator"
        self.stack.wait_for("the DAG parsed with the spark-submit route", reparsed, timeout=300)

        def triggered():
            try:
                return self.stack.api("POST", f"/api/v2/dags/{DAG_ID}/dagRuns",
                                      {"logical_date": None, "note": "compose-check: the spark-submit route"},
                                      attempts=1)
            except CheckFailed:
                return None  # the DAG is re-parsed after the restart
        run_ = self.stack.wait_for("a run triggered after the route switch", triggered, timeout=180)
        self.stack.wait_for_run(run_["dag_run_id"])
        self.require_route(run_["dag_run_id"], "WindowSparkSubmitOperator")
        summary = self.summary(run_["dag_run_id"])
        if summary is None or summary["records_read"] != count:
            raise CheckFailed(f"the spark-submit run read {summary and summary['records_read']} purchases, not {count}")
        apps = json.loads(self.stack.cmd(
            "exec", "-T", "spark-master", "python", "-c",
            "import json, urllib.request; print(json.dumps([a['name'] for a in json.load(urllib.request.urlopen("
            "'http://localhost:8080/json/'))['completedapps']]))", capture=True, quiet=True).stdout)
        from eos_etl.shop.schema import ShopTopics

        window_app = f"eos-etl-{ShopTopics().purchases}"  # the name run-window gives its Spark application
        if window_app not in apps:
            raise CheckFailed(f"no {window_app} application on the standalone master, only {apps}")
        say(f"spark-submit run {run_['dag_run_id']}: read {count}; the master's finished applications: "
            f"{sorted(set(apps))}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="compose_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", action="store_true", help="leave the stack running at the end")
    p.add_argument("--purchases", type=int, default=2000, help="purchases for the scheduled run (half as many "
                   "late ones for the backfill)")
    p.add_argument("--kill-purchases", type=int, default=100_000,
                   help="purchases for the window that is killed mid-flight")
    p.add_argument("--only", metavar="PHASES", help="development: only these phases (comma-separated), against "
                   "a stack an earlier --keep left running")
    args = p.parse_args(argv)
    return Check(args).main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
