"""A real single-node Apache Kafka broker (KRaft, combined broker+controller).

The jars come from Maven Central (see :mod:`.versions`); the broker runs as a
plain ``java kafka.Kafka server.properties`` process on loopback. State lives
in one directory (``var/kafka`` by default): ``server.properties``,
``log4j2.properties``, ``data/`` (the log dirs, kept across restarts),
``broker.pid`` and ``logs/server.log``.

Usage::

    broker = KafkaBroker.local()          # var/kafka, port 9092
    broker.start()                        # fetch jars, format once, start, wait
    broker.bootstrap_servers              # '127.0.0.1:9092'
    broker.restart()                      # keeps data
    broker.stop()
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from . import maven
from .errors import BrokerStartError, StackError
from .tools import port_accepts, require_free_port, require_tool
from .versions import KAFKA_BROKER

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092
READY_TIMEOUT_S = 90.0

# Settings that make one node work (replication factor 1 everywhere) and keep
# tests fast. Anything here can be overridden through ``overrides``.
_BASE_PROPERTIES: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # Missing topics must be an error, never silently created by a producer.
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    # Abort transactions that outlive their timeout within a second, not a minute.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "900000",
}

_LOG4J2 = """\
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


@dataclass
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    sasl_bootstrap_servers: str | None
    home: str
    log_file: str

    def describe(self) -> str:
        state = f"running (pid {self.pid})" if self.running else "stopped"
        lines = [f"Kafka broker: {state}", f"  bootstrap servers: {self.bootstrap_servers}"]
        if self.sasl_bootstrap_servers:
            lines.append(f"  SASL_PLAINTEXT (PLAIN) listener: {self.sasl_bootstrap_servers}")
        lines += [f"  home: {self.home}", f"  log: {self.log_file}"]
        return "\n".join(lines)


@dataclass
class KafkaBroker:
    home: Path
    port: int = DEFAULT_PORT
    controller_port: int | None = None
    # Optional SASL_PLAINTEXT listener with the PLAIN mechanism: {user: password}.
    sasl_port: int | None = None
    sasl_users: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, str] = field(default_factory=dict)
    heap: str = "768m"
    # KRaft feature levels fixed at format time, e.g. {"transaction.version": "1"}.
    features: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    @classmethod
    def local(cls) -> "KafkaBroker":
        """The project's development broker: var/kafka, port from EOS_ETL_KAFKA_PORT or 9092."""
        port = int(os.environ.get("EOS_ETL_KAFKA_PORT", DEFAULT_PORT))
        sasl_port = os.environ.get("EOS_ETL_KAFKA_SASL_PORT")
        broker = cls(home=paths.var_dir() / "kafka", port=port)
        if sasl_port:
            broker.sasl_port = int(sasl_port)
            broker.sasl_users = {"etl": os.environ.get("EOS_ETL_KAFKA_SASL_PASSWORD", "etl-secret")}
        return broker

    # -- layout ---------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.home / "logs" / "broker.out"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str | None:
        return f"{self.host}:{self.sasl_port}" if self.sasl_port else None

    def _controller_port(self) -> int:
        # Persisted so a restart reuses the port the storage was formatted with.
        stored = self.home / "controller.port"
        if self.controller_port is None:
            if stored.is_file():
                self.controller_port = int(stored.read_text())
            else:
                from .tools import free_port

                self.controller_port = free_port(self.host)
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(str(self.controller_port))
        return self.controller_port

    def properties(self) -> dict[str, str]:
        ctl = self._controller_port()
        listeners = [f"PLAINTEXT://{self.host}:{self.port}", f"CONTROLLER://{self.host}:{ctl}"]
        protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        advertised = [f"PLAINTEXT://{self.host}:{self.port}"]
        props = dict(_BASE_PROPERTIES)
        if self.sasl_port:
            listeners.append(f"SASL_PLAINTEXT://{self.host}:{self.sasl_port}")
            advertised.append(f"SASL_PLAINTEXT://{self.host}:{self.sasl_port}")
            protocol_map.append("SASL_PLAINTEXT:SASL_PLAINTEXT")
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required " + users + ";"
            )
        props.update(
            {
                "listeners": ",".join(listeners),
                "advertised.listeners": ",".join(advertised),
                "listener.security.protocol.map": ",".join(protocol_map),
                "controller.quorum.bootstrap.servers": f"{self.host}:{ctl}",
                "log.dirs": str(self.data_dir),
            }
        )
        props.update(self.overrides)
        return props

    # -- process --------------------------------------------------------------
    def _java(self) -> str:
        return require_tool("java", install_hint="apt-get install openjdk-17-jre-headless")

    def _classpath(self) -> str:
        maven.fetch(KAFKA_BROKER)
        return KAFKA_BROKER.classpath()

    def _write_config(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in sorted(self.properties().items()))
        self.properties_file.write_text(text)
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))

    def _jvm_args(self) -> list[str]:
        return [
            self._java(),
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            "-cp",
            self._classpath(),
        ]

    def _format_storage(self) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return
        base = self._jvm_args()
        cluster_id = subprocess.run(
            base + ["kafka.tools.StorageTool", "random-uuid"], capture_output=True, text=True, check=True
        ).stdout.strip().splitlines()[-1]
        proc = subprocess.run(
            base
            + ["kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id, "-c", str(self.properties_file)]
            + [arg for name, level in self.features.items() for arg in ("--feature", f"{name}={level}")],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BrokerStartError(f"formatting KRaft storage in {self.data_dir} failed:\n{proc.stdout}{proc.stderr}")

    def pid(self) -> int | None:
        """The broker's pid while any of its threads still runs; None once it is fully gone."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        if self._is_defunct(pid):
            return None
        return pid

    @staticmethod
    def _is_defunct(pid: int) -> bool:
        """True when only a zombie is left: every thread has exited (and so released its sockets)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[-1].split()[0]
            if state != "Z":
                return False
            # The main thread turns into a zombie first; the JVM's other threads
            # may still hold the listening sockets for a moment.
            if any(t != str(pid) for t in os.listdir(f"/proc/{pid}/task")):
                return False
        except (FileNotFoundError, ProcessLookupError):
            pass
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        except ChildProcessError:
            pass
        return True

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self, timeout: float = READY_TIMEOUT_S) -> "KafkaBroker":
        """Start the broker (idempotent) and wait until it answers metadata requests."""
        if self.is_running():
            self.wait_ready(timeout)
            return self
        require_free_port(self.port, "the Kafka broker")
        if self.sasl_port:
            require_free_port(self.sasl_port, "the Kafka broker's SASL listener")
        self._write_config()
        ctl = self.controller_port
        require_free_port(ctl, "the Kafka controller")
        self._format_storage()
        with open(self.stdout_file, "ab") as out:
            proc = subprocess.Popen(
                self._jvm_args() + ["kafka.Kafka", str(self.properties_file)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the CLI that started it
            )
        self.pid_file.write_text(str(proc.pid))
        log.info("Kafka broker starting (pid %d) on %s, log %s", proc.pid, self.bootstrap_servers, self.log_file)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise BrokerStartError(
                    f"the Kafka broker exited during start-up; last lines of {self.log_file}:\n{self.tail_log()}"
                )
            if port_accepts(self.port, self.host):
                try:
                    admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                    md = admin.list_topics(timeout=2)
                    if md.brokers:
                        return
                except Exception:  # noqa: BLE001 - not ready yet; keep polling until the deadline
                    pass
            time.sleep(0.25)
        raise BrokerStartError(
            f"the Kafka broker did not answer on {self.bootstrap_servers} within {timeout:.0f}s; "
            f"see {self.log_file}:\n{self.tail_log()}"
        )

    def stop(self, timeout: float = 60.0) -> None:
        """Clean shutdown (SIGTERM, the broker flushes and closes its logs)."""
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Hard kill (SIGKILL), as a crashed machine would; data already written stays."""
        self._signal_and_wait(signal.SIGKILL, 30.0)

    def _signal_and_wait(self, sig: int, timeout: float) -> None:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.1)
        if self.pid() is not None:
            log.warning("broker pid %d ignored %s for %.0fs; killing it", pid, signal.Signals(sig).name, timeout)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while self.pid() is not None and time.monotonic() < deadline:
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        # Make sure the listeners are released before anyone starts a new broker here.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and port_accepts(self.port, self.host, timeout=0.1):
            time.sleep(0.05)

    def restart(self, *, hard: bool = False, timeout: float = READY_TIMEOUT_S) -> "KafkaBroker":
        """Stop (or kill) and start again on the same data directory."""
        self.kill() if hard else self.stop()
        # The ports may linger in TIME_WAIT briefly; the listener uses SO_REUSEADDR.
        return self.start(timeout)

    def status(self) -> BrokerStatus:
        pid = self.pid()
        return BrokerStatus(
            running=pid is not None,
            pid=pid,
            bootstrap_servers=self.bootstrap_servers,
            sasl_bootstrap_servers=self.sasl_bootstrap_servers,
            home=str(self.home),
            log_file=str(self.log_file),
        )

    def tail_log(self, lines: int = 25) -> str:
        chunks = []
        for f in (self.stdout_file, self.log_file):
            if f.is_file():
                chunks.append("\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(chunks) or "(no log yet)"

    def wipe(self) -> None:
        """Delete all data (the broker must be stopped)."""
        if self.is_running():
            raise StackError("stop the broker before wiping its data")
        import shutil

        shutil.rmtree(self.home, ignore_errors=True)
