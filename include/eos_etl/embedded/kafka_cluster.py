"""Real Apache Kafka on loopback: one KRaft node, or a cluster of them.

A :class:`KafkaCluster` is a set of :class:`KafkaNode` processes started from
the Maven Central jars (see :mod:`.versions`), each a plain ``java kafka.Kafka
server.properties`` in combined mode (broker + controller). One node is the
embedded default; three give what production looks like: replication factor
3, ``min.insync.replicas`` 2, the offsets and transaction-state topics
replicated three times with ``transaction.state.log.min.isr`` 2 and unclean
leader election off. The controller quorum is the static voter set of all
nodes, so one code path formats and starts any size.

Layout under ``home``: ``cluster.json`` (node ids and ports, fixed at the first
start so restarts reuse what the storage was formatted with) and one
``node-<id>/`` per node with ``server.properties``, ``log4j2.properties``,
``data/`` (kept across restarts), ``node.pid`` and ``logs/server.log``.

Usage::

    cluster = KafkaCluster(home, size=3).start()   # fetch jars, format once, start, wait
    cluster.bootstrap_servers                       # '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3'
    cluster.node(2).kill(); cluster.node(2).start() # a single node's faults
    cluster.active_controller()                     # the KRaft quorum's leader
    cluster.stop()

The fault suite asks its metadata who leads what (:mod:`eos_etl_lab.faults.leaders`:
partition leader, transaction and group coordinator) so it can kill exactly that
node.

Where the nodes run is a :class:`NodePlacement`: by default every node on the
cluster's loopback address (:class:`LoopbackPlacement`); the network-partition
lab (:mod:`eos_etl_lab.faults.network_lab`) places each node on a host of its own,
a network namespace with its own address, and starts its process there.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from confluent_kafka.admin import AdminClient

from .. import paths
from ..arguments import switch_on
from ..errors import StackError
from ..host.errors import PortInUseError
from ..host.ports import free_port, port_accepts, port_is_free
from ..host.process import PidFile, wait_ports_free
from ..host.tools import require_tool
from ..jars import maven
from ..jars.versions import KAFKA_BROKER
from ..jvm.options import jvm_options
from ..kafka.connection import KafkaConnection
from ..kafka.errors import KafkaSetupError
from ..kafka.users import MECHANISM as SASL_MECHANISM
from ..kafka.users import set_scram_users
from .errors import BrokerStartError
from .tls import ensure_broker_tls, ensure_client_tls

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092
DEFAULT_CLUSTER_PORT = 19092
READY_TIMEOUT_S = 90.0

# Settings every node gets, whatever the cluster size. Anything here can be
# overridden through ``KafkaCluster.overrides``.
_BASE_PROPERTIES: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "group.initial.rebalance.delay.ms": "0",
    # Missing topics must be an error, never silently created by a producer.
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    # A replica that lost data must never become leader: committed transactions would vanish.
    "unclean.leader.election.enable": "false",
    # Abort transactions that outlive their timeout within a second, not a minute.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "900000",
    # A group without members (a batch pipeline's, between runs) keeps its committed offsets this
    # long after its last commit: 30 days rather than Kafka's 7, so a pipeline paused over a holiday
    # or a month-long upstream fix still shows its position and lag to monitoring tools. Nothing
    # depends on it: the pipeline's checkpoint topic keeps its position for as long as it exists.
    "offsets.retention.minutes": "43200",
    # Authorization is always on. The PLAINTEXT listener, the controller listener and
    # inter-broker traffic carry the ANONYMOUS principal, which is the super-user: whoever can
    # reach them administers the broker, so every listener binds loopback only (KafkaCluster
    # refuses any other host). Principals on the SASL_SSL listener get exactly the ACLs
    # granted to them (``python -m eos_etl acl grant``); no ACL, no access.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
}

#: The common name of the admin's client certificate (the super-user when PLAINTEXT is off).
ADMIN_CERT_NAME = "eos-etl-admin"

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


def replication_defaults(size: int) -> dict[str, str]:
    """Replication settings for a cluster of ``size`` nodes: 3 copies, 2 in sync, when there are 3."""
    rf = min(3, size)
    min_isr = max(1, rf - 1)
    # Internal topics: one partition per node spreads the coordinators (a single node keeps 1: fast start).
    internal_partitions = str(max(1, size))
    return {
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(rf),
        "offsets.topic.num.partitions": internal_partitions,
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": internal_partitions,
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(min_isr),
    }


class NodePlacement(Protocol):
    """Where each node of a cluster runs: its listeners' address and how its process is started."""

    #: True when the nodes' addresses are reachable from this machine only (loopback, or the private
    #: namespaces of a lab): the PLAINTEXT and controller listeners carry the super-user.
    private: bool

    def host(self, node_id: int) -> str:
        """The address node ``node_id`` listens on and advertises."""

    def command(self, node_id: int, argv: list[str]) -> list[str]:
        """``argv`` as started for node ``node_id`` (e.g. inside its network namespace)."""

    def port_is_free(self, node_id: int, port: int) -> bool:
        """Whether node ``node_id`` could listen on ``port`` now."""

    def free_port(self, node_id: int) -> int:
        """A port for another listener of node ``node_id``."""


@dataclass(frozen=True)
class LoopbackPlacement:
    """Every node on one loopback address, started as a plain child process."""

    address: str = "127.0.0.1"
    private: bool = True

    def host(self, node_id: int) -> str:
        return self.address

    def command(self, node_id: int, argv: list[str]) -> list[str]:
        return argv

    def port_is_free(self, node_id: int, port: int) -> bool:
        return port_is_free(port, self.address)

    def free_port(self, node_id: int) -> int:
        return free_port(self.address)


@dataclass
class NodeStatus:
    node_id: int
    running: bool
    paused: bool
    pid: int | None
    address: str
    sasl_address: str | None
    roles: str
    log_file: str

    def describe(self) -> str:
        state = ("paused" if self.paused else "running") + f" (pid {self.pid})" if self.running else "stopped"
        sasl = f", SASL {self.sasl_address}" if self.sasl_address else ""
        return f"  node {self.node_id} [{self.roles}] {self.address}{sasl}: {state}, log {self.log_file}"


@dataclass
class ClusterStatus:
    nodes: list[NodeStatus]
    bootstrap_servers: str
    sasl_bootstrap_servers: str | None
    home: str
    active_controller: int | None = None
    ca_file: str | None = None
    admin_pem: str | None = None  # PLAINTEXT off: the admin's client certificate

    @property
    def running(self) -> bool:
        return any(n.running for n in self.nodes)

    @property
    def pid(self) -> int | None:  # the first node's (one-node status lines)
        return self.nodes[0].pid if self.nodes else None

    def describe(self) -> str:
        up = sum(n.running for n in self.nodes)
        lines = [f"Kafka ({len(self.nodes)} node{'s' if len(self.nodes) > 1 else ''}, {up} running): "
                 f"bootstrap servers {self.bootstrap_servers}"
                 + (" (PLAINTEXT, the super-user's)" if not self.admin_pem else "")]
        if self.admin_pem:
            lines.append(f"  PLAINTEXT off: those speak TLS with client certificates; the super-user is "
                         f"--security-protocol SSL --ssl-ca-location {self.ca_file} --ssl-client-pem {self.admin_pem}")
        if self.sasl_bootstrap_servers:
            lines.append(f"  SASL_SSL ({SASL_MECHANISM}) bootstrap servers: {self.sasl_bootstrap_servers}, "
                         f"CA certificate {self.ca_file}")
        if self.active_controller is not None:
            lines.append(f"  active controller: node {self.active_controller}")
        lines += [n.describe() for n in self.nodes]
        lines.append(f"  home: {self.home}")
        return "\n".join(lines)


@dataclass
class KafkaNode:
    """One KRaft process (broker + controller) of a :class:`KafkaCluster`."""

    cluster: "KafkaCluster"
    node_id: int
    port: int
    controller_port: int
    sasl_port: int | None = None

    # -- layout ---------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.cluster.home / f"node-{self.node_id}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.home / "logs" / "node.out"

    @property
    def pid_file(self) -> Path:
        return self.home / "node.pid"

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def host(self) -> str:
        """The address this node listens on and advertises."""
        return self.cluster.placement.host(self.node_id)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_address(self) -> str | None:
        return f"{self.host}:{self.sasl_port}" if self.sasl_port else None

    @property
    def ports(self) -> list[int]:
        return [p for p in (self.port, self.controller_port, self.sasl_port) if p]

    def properties(self) -> dict[str, str]:
        c = self.cluster
        host = self.host
        props = {**_BASE_PROPERTIES, **replication_defaults(c.size)}
        if c.plaintext:
            listeners = [f"PLAINTEXT://{host}:{self.port}", f"CONTROLLER://{host}:{self.controller_port}"]
            protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
            advertised = [f"PLAINTEXT://{host}:{self.port}"]
        else:
            # PLAINTEXT off: the admin and inter-broker listener (INTERNAL) and the controller
            # listener speak TLS and require a client certificate from the home's CA. The
            # super-users are the admin's and the brokers' certificates, nobody anonymous.
            tls = c.tls()
            listeners = [f"INTERNAL://{host}:{self.port}", f"CONTROLLER://{host}:{self.controller_port}"]
            protocol_map = ["INTERNAL:SSL", "CONTROLLER:SSL"]
            advertised = [f"INTERNAL://{host}:{self.port}"]
            props["inter.broker.listener.name"] = "INTERNAL"
            props["super.users"] = f"{c.admin_tls().principal};{tls.principal}"
            for name in ("internal", "controller"):
                props.update({
                    f"listener.name.{name}.ssl.keystore.type": "PEM",
                    f"listener.name.{name}.ssl.keystore.location": str(tls.keystore_file),
                    f"listener.name.{name}.ssl.truststore.type": "PEM",
                    f"listener.name.{name}.ssl.truststore.location": str(tls.ca_file),
                    f"listener.name.{name}.ssl.client.auth": "required",
                })
        if self.sasl_port:
            listeners.append(f"SASL_SSL://{host}:{self.sasl_port}")
            advertised.append(f"SASL_SSL://{host}:{self.sasl_port}")
            protocol_map.append("SASL_SSL:SASL_SSL")
            # SCRAM: the broker stores salted hashes in the cluster metadata (see
            # KafkaCluster.ensure_scram_users); no password is in this file or on a command line.
            props["sasl.enabled.mechanisms"] = SASL_MECHANISM
            props[f"listener.name.sasl_ssl.{SASL_MECHANISM.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
            props["listener.name.sasl_ssl.ssl.keystore.location"] = str(c.tls().keystore_file)
        props.update(
            {
                "node.id": str(self.node_id),
                "listeners": ",".join(listeners),
                "advertised.listeners": ",".join(advertised),
                "listener.security.protocol.map": ",".join(protocol_map),
                "controller.quorum.voters": c.quorum_voters,
                "log.dirs": str(self.data_dir),
            }
        )
        props.update(c.overrides)
        return props

    # -- process --------------------------------------------------------------
    def _write_config(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in sorted(self.properties().items()))
        self.properties_file.write_text(text)
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))

    def _jvm_args(self) -> list[str]:
        args = self.cluster.jvm_args(self.home / "log4j2.properties")
        if self.cluster.jmx:
            port = self.jmx_port()
            # The registry and the connector on one port, on the node's address only.
            args[1:1] = [f"-Dcom.sun.management.jmxremote.port={port}",
                         f"-Dcom.sun.management.jmxremote.rmi.port={port}",
                         f"-Dcom.sun.management.jmxremote.host={self.host}", f"-Djava.rmi.server.hostname={self.host}",
                         "-Dcom.sun.management.jmxremote.authenticate=false",
                         "-Dcom.sun.management.jmxremote.ssl=false"]
        return args

    def jmx_port(self) -> int:
        """The node's JMX port, chosen at its first start and kept in its home."""
        port_file = self.home / "jmx.port"
        if not port_file.is_file():
            self.home.mkdir(parents=True, exist_ok=True)
            port_file.write_text(str(self.cluster.placement.free_port(self.node_id)))
        return int(port_file.read_text())

    @property
    def jmx_url(self) -> str:
        return f"service:jmx:rmi:///jndi/rmi://{self.host}:{self.jmx_port()}/jmxrmi"

    def format_storage(self, cluster_id: str) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return
        self._write_config()
        features = [arg for name, level in self.cluster.features.items() for arg in ("--feature", f"{name}={level}")]
        proc = subprocess.run(
            self._jvm_args() + ["kafka.tools.StorageTool", "format", "-t", cluster_id,
                                "-c", str(self.properties_file), *features],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise BrokerStartError(f"formatting KRaft storage in {self.data_dir} failed:\n{proc.stdout}{proc.stderr}")

    def pid(self) -> int | None:
        """The node's pid while the process exists (running or paused); None once it is gone."""
        return PidFile(self.pid_file).pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    def is_paused(self) -> bool:
        return PidFile(self.pid_file).state() == "T"

    def spawn(self) -> None:
        """Start the process (storage must be formatted); returns without waiting."""
        for port in self.ports:
            if not self.cluster.placement.port_is_free(self.node_id, port):
                raise PortInUseError(
                    f"port {port} on {self.host} is already in use, so Kafka node {self.node_id} cannot listen "
                    f"there; stop whatever holds it (e.g. `ss -ltnp 'sport = :{port}'`) or choose another port")
        self._write_config()
        with open(self.stdout_file, "ab") as out:
            proc = subprocess.Popen(
                self.cluster.placement.command(self.node_id,
                                               self._jvm_args() + ["kafka.Kafka", str(self.properties_file)]),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the CLI that started it
            )
        PidFile(self.pid_file).record(proc.pid)
        log.info("Kafka node %d starting (pid %d) on %s, log %s", self.node_id, proc.pid, self.address, self.log_file)

    def start(self, timeout: float = READY_TIMEOUT_S) -> "KafkaNode":
        """Start this node (idempotent) and wait until the cluster serves it as a broker."""
        if not self.is_running():
            self.cluster.format_all()
            self.spawn()
        elif self.is_paused():
            self.resume()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise BrokerStartError(
                    f"Kafka node {self.node_id} exited during start-up; last lines of {self.log_file}:\n"
                    f"{self.tail_log()}"
                )
            if port_accepts(self.port, self.host):
                try:
                    admin = AdminClient({**self.cluster.admin_connection(self.address).client_config(),
                                         "log_level": 0})
                    # Ready once the quorum has registered this node as an unfenced broker.
                    if self.node_id in admin.list_topics(timeout=2).brokers:
                        return
                except Exception:  # noqa: BLE001 - not ready yet; keep polling until the deadline
                    pass
            time.sleep(0.25)
        raise BrokerStartError(
            f"Kafka node {self.node_id} did not answer on {self.address} within {timeout:.0f}s; "
            f"see {self.log_file}:\n{self.tail_log()}"
        )

    def stop(self, timeout: float = 60.0) -> None:
        """Clean shutdown (SIGTERM: the node flushes and closes its logs, hands over leadership)."""
        if self.is_paused():
            self.resume()
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Hard kill (SIGKILL), as a crashed machine would; what reached the disk stays."""
        self._signal_and_wait(signal.SIGKILL, 30.0)

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its sockets open (a stand-in for a network partition).
        Returns once every thread has stopped: from then on, nothing sent to this node is answered."""
        if not PidFile(self.pid_file).freeze():
            raise StackError(f"Kafka node {self.node_id} is not running")

    def resume(self) -> None:
        PidFile(self.pid_file).send(signal.SIGCONT)

    def _signal_and_wait(self, sig: int, timeout: float) -> None:
        # The kernel may hold the ports a moment after the process is gone (sockets closing):
        # a start right after needs every port this node listens on free again, where it listens.
        what = f"Kafka node {self.node_id}"
        PidFile(self.pid_file).end(what, sig, timeout)
        placement = self.cluster.placement
        wait_ports_free(tuple(self.ports), what, is_free=lambda port: placement.port_is_free(self.node_id, port))

    def restart(self, *, hard: bool = False, timeout: float = READY_TIMEOUT_S) -> "KafkaNode":
        self.kill() if hard else self.stop()
        return self.start(timeout)

    def status(self) -> NodeStatus:
        pid = self.pid()
        return NodeStatus(node_id=self.node_id, running=pid is not None, paused=self.is_paused(), pid=pid,
                          address=self.address, sasl_address=self.sasl_address, roles="broker,controller",
                          log_file=str(self.log_file))

    def tail_log(self, lines: int = 25) -> str:
        chunks = []
        for f in (self.stdout_file, self.log_file):
            if f.is_file():
                chunks.append("\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(chunks) or "(no log yet)"

    def quorum_state(self) -> dict | None:
        """This node's persisted view of the KRaft election (leaderId, leaderEpoch, ...)."""
        path = self.data_dir / "__cluster_metadata-0" / "quorum-state"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None


@dataclass
class KafkaCluster:
    """A set of KRaft nodes in combined mode on loopback; ``size=1`` is the embedded default broker."""

    home: Path
    size: int = 1
    # Client ports, one per node (None: the first node at ``port`` when given, else free ports).
    ports: list[int] | None = None
    port: int | None = None
    # Optional SASL_SSL listener (SCRAM-SHA-512, certificate from the home's own CA) on every
    # node, with these SCRAM users: {user: password}. They get no ACLs by themselves.
    sasl_users: dict[str, str] = field(default_factory=dict)
    # False: no PLAINTEXT listener at all; the super-user is whoever holds the admin client
    # certificate (<home>/tls/eos-etl-admin.pem, mutual TLS), see ``admin_connection``.
    plaintext: bool = True
    overrides: dict[str, str] = field(default_factory=dict)
    heap: str | None = None
    # KRaft feature levels fixed at format time, e.g. {"transaction.version": "1"}.
    features: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    # Where the nodes run (None: all on ``host``, a loopback address).
    placement: NodePlacement | None = None
    # Each node's metrics over JMX, on a free port of its own address, unauthenticated: for
    # benchmarks that read the brokers' request counters (``KafkaNode.jmx_url``), never for a stack.
    jmx: bool = False
    nodes: list[KafkaNode] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        if self.size < 1:
            raise StackError("a Kafka cluster needs at least one node")
        if self.placement is None:
            if not ipaddress.ip_address(self.host).is_loopback:
                raise StackError(f"the project's own Kafka listens on loopback only (its PLAINTEXT listener is "
                                 f"the super-user's), not on {self.host}; use a managed cluster beyond this machine")
            self.placement = LoopbackPlacement(self.host)
        elif not self.placement.private:
            raise StackError("the project's own Kafka listens only where this machine alone can reach it (its "
                             "PLAINTEXT listener is the super-user's): loopback or a lab's private namespaces")
        if self.heap is None:
            self.heap = "768m" if self.size == 1 else "512m"
        self.nodes = self._layout()

    @classmethod
    def local(cls, size: int | None = None) -> "KafkaCluster":
        """The project's own Kafka: one node in var/kafka on $EOS_ETL_KAFKA_PORT (9092), or
        ``size`` > 1 nodes in var/kafka-cluster from $EOS_ETL_KAFKA_CLUSTER_PORT (19092) up."""
        sasl_password = os.environ.get("EOS_ETL_KAFKA_SASL_PASSWORD")
        users = {"etl": sasl_password} if os.environ.get("EOS_ETL_KAFKA_SASL_PORT") and sasl_password else {}
        plaintext = switch_on("EOS_ETL_KAFKA_PLAINTEXT")
        if not size or size == 1:
            port = int(os.environ.get("EOS_ETL_KAFKA_PORT", DEFAULT_PORT))
            return cls(home=paths.var_dir() / "kafka", size=1, ports=[port], sasl_users=users, plaintext=plaintext)
        base = int(os.environ.get("EOS_ETL_KAFKA_CLUSTER_PORT", DEFAULT_CLUSTER_PORT))
        return cls(home=paths.var_dir() / "kafka-cluster", size=size, ports=[base + i for i in range(size)],
                   sasl_users=users, plaintext=plaintext)

    # -- layout: ports fixed at the first start, reused by every restart ----------------
    @property
    def layout_file(self) -> Path:
        return self.home / "cluster.json"

    def _layout(self) -> list[KafkaNode]:
        if self.layout_file.is_file():
            stored = json.loads(self.layout_file.read_text())
            if len(stored["nodes"]) == self.size:
                return [KafkaNode(self, n["node_id"], n["port"], n["controller_port"], n.get("sasl_port"))
                        for n in stored["nodes"]]
            raise StackError(f"{self.home} holds a {len(stored['nodes'])}-node cluster, not {self.size} nodes; "
                             "use another home or wipe it")
        ports = list(self.ports or ([self.port] if self.port else []))
        nodes = []
        for i in range(self.size):
            node_id = i + 1
            port = ports[i] if i < len(ports) else self.placement.free_port(node_id)
            nodes.append(KafkaNode(self, node_id, port, self.placement.free_port(node_id),
                                   self.placement.free_port(node_id) if self.sasl_users else None))
        self.home.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(json.dumps(
            {"nodes": [{"node_id": n.node_id, "port": n.port, "controller_port": n.controller_port,
                        "sasl_port": n.sasl_port} for n in nodes]}, indent=1))
        return nodes

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise StackError(f"no node {node_id} in this {self.size}-node cluster")

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str | None:
        return ",".join(n.sasl_address for n in self.nodes) if self.sasl_users else None

    @property
    def log_file(self) -> Path:
        return self.nodes[0].log_file

    def tls(self):
        """The home's CA and broker certificate (:mod:`eos_etl.embedded.tls`), made on first use."""
        hosts = tuple(dict.fromkeys(n.host for n in self.nodes)) if self.nodes else (self.host,)
        return ensure_broker_tls(self.home / "tls", (*hosts, "localhost"))

    def admin_tls(self):
        """The admin's client certificate from the home's CA (used when PLAINTEXT is off)."""
        return ensure_client_tls(self.home / "tls", ADMIN_CERT_NAME)

    def admin_connection(self, addresses: str | None = None):
        """How the super-user reaches the nodes (``addresses``: default the running ones): the loopback
        PLAINTEXT listener, or with PLAINTEXT off, TLS with the admin's client certificate."""
        live = addresses or ",".join(n.address for n in self.running_nodes()) or self.bootstrap_servers
        if self.plaintext:
            return KafkaConnection(live)
        return KafkaConnection(live, "SSL", ssl_ca_location=str(self.ca_file),
                               ssl_client_pem=str(self.admin_tls().pem_file))

    @property
    def ca_file(self) -> Path:
        """The CA certificate SASL_SSL clients verify the brokers with."""
        return self.tls().ca_file

    def add_scram_user(self, user: str, password: str) -> None:
        """Another SCRAM user on the running cluster (kept for later restarts of this object)."""
        self.sasl_users[user] = password
        self.ensure_scram_users()

    def ensure_scram_users(self) -> None:
        """Create or update the SCRAM credentials of ``sasl_users`` (as the super-user, through
        ``admin_connection``; the passwords travel in the request only)."""
        try:
            set_scram_users(self.admin_connection(), self.sasl_users, timeout_s=READY_TIMEOUT_S)
        except KafkaSetupError as exc:
            raise BrokerStartError(str(exc)) from exc

    # -- processes --------------------------------------------------------------------
    def jvm_args(self, log4j_file: Path) -> list[str]:
        java = require_tool("java", install_hint="apt-get install openjdk-17-jre-headless")
        maven.fetch(KAFKA_BROKER)
        return [java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={log4j_file}", *jvm_options(), "-cp", KAFKA_BROKER.classpath()]

    def format_all(self) -> None:
        """Format every node's storage once, all with the same cluster id."""
        if all((n.data_dir / "meta.properties").is_file() for n in self.nodes):
            return
        id_file = self.home / "cluster.id"
        if not id_file.is_file():
            out = subprocess.run(self.jvm_args(self.home / "unused-log4j2.properties")
                                 + ["kafka.tools.StorageTool", "random-uuid"],
                                 capture_output=True, text=True, check=True)
            id_file.write_text(out.stdout.strip().splitlines()[-1])
        cluster_id = id_file.read_text().strip()
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.format_storage(cluster_id), self.nodes))

    def start(self, timeout: float = READY_TIMEOUT_S) -> "KafkaCluster":
        """Start every node that is not running (idempotent); wait until all serve as brokers."""
        self.format_all()
        for n in self.nodes:
            if not n.is_running():
                n.spawn()
            elif n.is_paused():
                n.resume()
        for n in self.nodes:
            n.wait_ready(timeout)
        self.ensure_scram_users()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        for n in self.nodes:
            n.wait_ready(timeout)

    def stop(self, timeout: float = 60.0) -> None:
        # In parallel: a node stopping alone waits for the others to take over its leaderships.
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.stop(timeout), self.nodes))

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()

    def restart(self, *, hard: bool = False, timeout: float = READY_TIMEOUT_S) -> "KafkaCluster":
        """Stop (or kill) every node and start them again on the same data."""
        self.kill() if hard else self.stop()
        return self.start(timeout)

    def rolling_restart(self, *, hard: bool = False, pause_s: float = 0.0, timeout: float = READY_TIMEOUT_S) -> None:
        """Restart the nodes one at a time, each back in service before the next goes."""
        for n in self.nodes:
            n.restart(hard=hard, timeout=timeout)
            self.wait_in_sync(timeout)
            time.sleep(pause_s)

    def pid(self) -> int | None:
        return self.nodes[0].pid()

    def is_running(self) -> bool:
        return all(n.is_running() for n in self.nodes)

    def running_nodes(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_running() and not n.is_paused()]

    def status(self) -> ClusterStatus:
        controller = self.active_controller() if self.running_nodes() else None
        return ClusterStatus(nodes=[n.status() for n in self.nodes], bootstrap_servers=self.bootstrap_servers,
                             sasl_bootstrap_servers=self.sasl_bootstrap_servers, home=str(self.home),
                             active_controller=controller,
                             ca_file=str(self.tls().ca_file) if self.sasl_users or not self.plaintext else None,
                             admin_pem=None if self.plaintext else str(self.admin_tls().pem_file))

    def tail_log(self, lines: int = 25) -> str:
        return "\n".join(f"--- node {n.node_id} ---\n{n.tail_log(lines)}" for n in self.nodes)

    def wipe(self) -> None:
        """Delete all data (every node must be stopped)."""
        if any(n.is_running() for n in self.nodes):
            raise StackError("stop the Kafka nodes before wiping their data")
        shutil.rmtree(self.home, ignore_errors=True)

    # -- metadata: the live nodes' view (faults.leaders asks it who leads what) ------------
    def _admin(self) -> AdminClient:
        return AdminClient({**self.admin_connection().client_config(), "log_level": 0})

    def metadata(self, topic: str | None = None, timeout: float = 10.0):
        """Cluster metadata (of ``topic``, default all) from the running nodes, asked again until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._admin().list_topics(topic=topic, timeout=max(1.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - retried until the deadline, then reported
                if time.monotonic() >= deadline:
                    raise StackError(f"no metadata from the cluster's live nodes within {timeout:.0f}s: {exc}") from exc
                time.sleep(0.2)

    def active_controller(self) -> int | None:
        """The KRaft quorum's leader, from the newest election any running node has persisted."""
        states = [s for n in self.running_nodes() if (s := n.quorum_state())]
        best = max(states, key=lambda s: s.get("leaderEpoch", -1), default=None)
        if best is None or best.get("leaderId", -1) < 0:
            return None
        return best["leaderId"]

    def wait_in_sync(self, timeout: float = READY_TIMEOUT_S, topics: list[str] | None = None) -> None:
        """Wait until every partition (of ``topics``, default all) has its full replica set in sync."""
        deadline = time.monotonic() + timeout
        while True:
            md = self.metadata(None, max(1.0, deadline - time.monotonic()))
            lagging = [(t, p) for t, tm in md.topics.items() if topics is None or t in topics
                       for p, pm in tm.partitions.items() if len(pm.isrs) < len(pm.replicas) or pm.leader < 0]
            if not lagging:
                return
            if time.monotonic() > deadline:
                raise StackError(f"partitions not back in sync within {timeout:.0f}s: {lagging[:10]}")
            time.sleep(0.25)
