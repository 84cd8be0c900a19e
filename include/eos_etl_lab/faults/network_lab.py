"""A three-broker Kafka cluster and the job on hosts of their own, cut apart Jepsen-style.

:class:`NetworkLab` owns the whole lab: a network namespace per Kafka node
(``n1``..``n3``) and per job host (``job``, ``job2``: a run's driver and its
Spark local executors), each with its own address on one bridge, and the
:class:`~eos_etl.embedded.kafka_cluster.KafkaCluster` placed on them (every node
listens on and advertises its own host's address). Faults are network faults
only: :meth:`NetworkLab.partition` (both ways or one way), :meth:`isolate`,
:meth:`split`, :meth:`lossy` and :meth:`heal`; processes stay alive and keep
serving whoever can still reach them.

Layout (``<tag>`` = ``eosnl-<pid>-<n>``)::

    <tag>-sw    the switch: bridge br0, one veth port per host (and "obs")
    <tag>-n1..3 Kafka node N at <subnet>.1N, ports 9092 (clients) and 9093 (controller)
    <tag>-job   the job's host at <subnet>.21; <tag>-job2 at <subnet>.22
    root        one veth (enl...) at <subnet>.1: the observer

The observer is this process (the harness: admin questions, the checker,
Kafka's tools). It is never cut off, the way Jepsen's control node keeps its
SSH connections: a verdict must not depend on the fault it judges.

A cut is an iptables DROP on the *receiving* host (INPUT, by source address,
in a chain of its own): packets vanish on the wire and senders see silence
until their timeouts, as in a real partition. (A DROP on OUTPUT would fail the
sender's calls at once with EPERM, which no network does.) ``lossy`` drops a
random share of the packets (``-m statistic --mode random``). ARP is not
filtered, so a healed link works at once.

Nothing leaves the lab: the bridge is in the switch namespace, not in the
machine's (where a Docker daemon sets FORWARD to DROP and may load
``br_netfilter``), the subnet is a private 10.x/24 no route of the machine
uses, and the only link into the machine's namespace is the observer's.
Namespaces left by a killed lab are removed when the next one starts.
"""

from __future__ import annotations

import fcntl
import ipaddress
import itertools
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from eos_etl.embedded.kafka_cluster import KafkaCluster, KafkaNode

from .netns import Netns, NetnsError, remove_leftovers, require_netns_support, run

log = logging.getLogger(__name__)

PREFIX = "eosnl"
CLIENT_PORT = 9092
#: Client, controller (and SASL) ports of every node: each has an address of its own.
_NODE_PORTS = (9093, 9094)
JOB_HOSTS = ("job", "job2")
#: The chain (in every host's filter table, jumped to from INPUT) that holds the lab's cuts.
CHAIN = "EOSNET"
#: Where the lab's /24 is taken from: the first 10.<n>.0.0/24 that no route of the machine overlaps.
SUBNET_CANDIDATES = tuple(f"10.{n}.0.0/24" for n in range(231, 251))
#: Held while a lab picks its subnet and adds its route, so two labs starting at once never share one.
LOCK_FILE = "/run/eos-netlab.lock"

_counter = itertools.count(1)

HostRef = str | int | KafkaNode


@dataclass(frozen=True)
class Host:
    name: str
    netns: Netns
    address: str


@dataclass
class Fault:
    """One cut in force: packets from ``source`` to ``target`` are dropped (all, or a share)."""

    source: str
    target: str
    rate: float = 1.0

    def describe(self) -> str:
        return f"{self.source} -> {self.target}" + ("" if self.rate >= 1.0 else f" ({self.rate:.0%} lost)")


@dataclass
class LabStatus:
    tag: str
    subnet: str
    hosts: dict[str, str]  # name -> address
    faults: list[str]
    rules: dict[str, list[str]]  # host -> iptables rules in the lab's chain, as the kernel has them
    cluster: str

    def to_dict(self) -> dict:
        return {"tag": self.tag, "subnet": self.subnet, "hosts": self.hosts, "faults": self.faults,
                "rules": self.rules}

    def describe(self) -> str:
        lines = [f"network lab {self.tag} on {self.subnet}:"]
        lines += [f"  {name:<5} {address}" for name, address in self.hosts.items()]
        lines.append("  cuts: " + (", ".join(self.faults) or "none (healed)"))
        return "\n".join(lines) + "\n" + self.cluster


class NamespacePlacement:
    """Kafka node N on host ``n<N>`` of a :class:`NetworkLab` (a
    :class:`~eos_etl.embedded.kafka_cluster.NodePlacement`)."""

    #: Reachable only from the lab's namespaces and, through the observer's link, from this machine.
    private = True

    def __init__(self, lab: "NetworkLab"):
        self._lab = lab
        self._next_port: dict[int, Iterable[int]] = {}

    def _host(self, node_id: int) -> Host:
        return self._lab.host(f"n{node_id}")

    def host(self, node_id: int) -> str:
        return self._host(node_id).address

    def command(self, node_id: int, argv: list[str]) -> list[str]:
        return self._host(node_id).netns.command(argv)

    def port_is_free(self, node_id: int, port: int) -> bool:
        host = self._host(node_id)
        return host.netns.port_is_free(host.address, port)

    def free_port(self, node_id: int) -> int:
        ports = self._next_port.setdefault(node_id, iter(_NODE_PORTS))
        return next(ports)


@dataclass
class NetworkLab:
    """Kafka nodes and job hosts in network namespaces of their own, on one private bridge."""

    home: Path
    size: int = 3
    # KRaft feature levels the cluster is formatted with, e.g. {"transaction.version": "1"}.
    features: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, str] = field(default_factory=dict)
    job_hosts: tuple[str, ...] = JOB_HOSTS
    heap: str | None = None
    tag: str = ""
    subnet: str = ""
    cluster: KafkaCluster | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    _switch: Netns | None = None
    observer_link: str = ""

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        self.tag = self.tag or f"{PREFIX}-{os.getpid()}-{next(_counter)}"

    # -- hosts ------------------------------------------------------------------------------
    @property
    def host_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.size + 1)] + list(self.job_hosts)

    def host(self, ref: HostRef) -> Host:
        name = self._name(ref)
        try:
            return self.hosts[name]
        except KeyError:
            raise NetnsError(f"no host {name!r} in this lab (hosts: {', '.join(self.host_names)})") from None

    @staticmethod
    def _name(ref: HostRef) -> str:
        if isinstance(ref, KafkaNode):
            return f"n{ref.node_id}"
        if isinstance(ref, int):
            return f"n{ref}"
        return ref

    def _group(self, refs: HostRef | Iterable[HostRef]) -> list[Host]:
        if isinstance(refs, (str, int, KafkaNode)):
            refs = [refs]
        return [self.host(r) for r in refs]

    def _address(self, i: int) -> str:
        net = ipaddress.ip_network(self.subnet)
        return str(net.network_address + i)

    def job_command(self, argv: list[str], host: str = "job") -> list[str]:
        """``argv`` run on a job host (its driver, and Spark's local executors with it)."""
        return self.host(host).netns.command(argv)

    @staticmethod
    def job_env() -> dict[str, str]:
        # Spark's driver and executors bind the host's loopback (local mode): nobody else needs them.
        return {"SPARK_LOCAL_IP": "127.0.0.1"}

    # -- set-up and tear-down -----------------------------------------------------------------
    def _pick_subnet(self) -> str:
        routes = run(["ip", "-4", "-j", "route", "show", "table", "all"], check=False).stdout
        taken = []
        for route in json.loads(routes or "[]"):
            dst = route.get("dst", "")
            if dst and dst != "default":
                try:
                    taken.append(ipaddress.ip_network(dst, strict=False))
                except ValueError:
                    continue
        for candidate in SUBNET_CANDIDATES:
            net = ipaddress.ip_network(candidate)
            if not any(net.overlaps(t) for t in taken):
                return candidate
        raise NetnsError(f"no free private subnet for the lab among {SUBNET_CANDIDATES[0]}..{SUBNET_CANDIDATES[-1]}")

    def _build_network(self) -> None:
        require_netns_support()
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_leftovers(PREFIX)
            self.subnet = self.subnet or self._pick_subnet()
            self._wire()

    def _wire(self) -> None:
        self._switch = Netns(f"{self.tag}-sw").create()
        sw = self._switch
        sw.ip("link", "add", "br0", "type", "bridge")
        sw.ip("link", "set", "br0", "up")
        # If br_netfilter is loaded (a Docker daemon does that), bridged frames would pass this
        # namespace's iptables; it has no rules, but say so explicitly.
        sw.run("sh", "-c", "f=/proc/sys/net/bridge/bridge-nf-call-iptables; [ ! -e $f ] || echo 0 > $f",
               check=False)
        prefix_len = ipaddress.ip_network(self.subnet).prefixlen
        numbers = {f"n{i}": 10 + i for i in range(1, self.size + 1)}
        numbers.update({name: 21 + i for i, name in enumerate(self.job_hosts)})
        for name in self.host_names:
            ns = Netns(f"{self.tag}-{name}").create()
            address = self._address(numbers[name])
            sw.ip("link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", ns.name)
            sw.ip("link", "set", name, "master", "br0", "up")
            ns.ip("addr", "add", f"{address}/{prefix_len}", "dev", "eth0")
            ns.ip("link", "set", "eth0", "up")
            ns.iptables("-N", CHAIN)
            ns.iptables("-A", "INPUT", "-j", CHAIN)
            self.hosts[name] = Host(name, ns, address)
        # The observer's link: this process reaches every host through it.
        self.observer_link = f"enl{os.getpid():x}{self.tag.rsplit('-', 1)[-1]}"[:15]
        run(["ip", "link", "add", self.observer_link, "type", "veth", "peer", "name", "obs", "netns", sw.name])
        sw.ip("link", "set", "obs", "master", "br0", "up")
        run(["ip", "addr", "add", f"{self._address(1)}/{prefix_len}", "dev", self.observer_link])
        run(["ip", "link", "set", self.observer_link, "up"])
        log.info("network lab %s: %s", self.tag, ", ".join(f"{h.name} {h.address}" for h in self.hosts.values()))

    def start(self, timeout: float = 180.0, *, with_cluster: bool = True) -> "NetworkLab":
        """Build the network, format (once) and start the cluster on it; wait until every node serves.
        ``with_cluster=False``: the network alone (hosts, bridge, observer link)."""
        try:
            if self._switch is None:
                self._build_network()
            if not with_cluster:
                return self
            if self.cluster is None:
                self.cluster = KafkaCluster(home=self.home, size=self.size, ports=[CLIENT_PORT] * self.size,
                                            overrides=dict(self.overrides), heap=self.heap,
                                            features=dict(self.features), placement=NamespacePlacement(self))
            self.cluster.start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the nodes (killed if they do not stop) and remove every namespace and link of the lab."""
        try:
            self.heal()
            if self.cluster is not None:
                # Killed, not stopped: the lab's data is thrown away with it, and a node that was
                # cut off a moment ago can take half a minute over a clean shutdown.
                self.cluster.kill()
        finally:
            for host in self.hosts.values():
                host.netns.delete()
            if self._switch is not None:
                self._switch.delete()
            if self.observer_link:
                run(["ip", "link", "delete", self.observer_link], check=False)
            self.hosts.clear()
            self._switch = None

    def __enter__(self) -> "NetworkLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- faults ---------------------------------------------------------------------------------
    def _drop(self, source: Host, target: Host, rate: float = 1.0) -> None:
        rule = ["-A", CHAIN, "-s", source.address]
        if rate < 1.0:
            rule += ["-m", "statistic", "--mode", "random", "--probability", f"{rate:.4f}"]
        target.netns.iptables(*rule, "-j", "DROP")
        self.faults.append(Fault(source.name, target.name, rate))

    def partition(self, a: HostRef | Iterable[HostRef], b: HostRef | Iterable[HostRef], *,
                  one_way: bool = False) -> None:
        """Cut every host of ``a`` off from every host of ``b``; ``one_way``: only what ``a`` sends to ``b``
        is lost (``b``'s answers and requests still reach ``a``)."""
        for x in self._group(a):
            for y in self._group(b):
                if x.name == y.name:
                    continue
                self._drop(x, y)
                if not one_way:
                    self._drop(y, x)
        log.info("network lab %s: cut %s", self.tag, "; ".join(f.describe() for f in self.faults))

    def split(self, side_a: Iterable[HostRef], side_b: Iterable[HostRef]) -> None:
        """Two sides that cannot reach each other (a majority/minority split)."""
        self.partition(side_a, side_b)

    def isolate(self, ref: HostRef) -> None:
        """Cut one host off from every other host of the lab (the observer still reaches it)."""
        name = self.host(ref).name
        self.partition(name, [n for n in self.host_names if n != name])

    def lossy(self, a: HostRef | Iterable[HostRef], b: HostRef | Iterable[HostRef], rate: float) -> None:
        """Lose a random ``rate`` (0-1) of the packets between ``a`` and ``b``, both ways."""
        if not 0.0 < rate < 1.0:
            raise ValueError(f"a lossy link loses between 0 and 1 of its packets, not {rate}")
        for x in self._group(a):
            for y in self._group(b):
                if x.name != y.name:
                    self._drop(x, y, rate)
                    self._drop(y, x, rate)
        log.info("network lab %s: lossy %s", self.tag, "; ".join(f.describe() for f in self.faults))

    def heal(self) -> None:
        """Remove every cut: all hosts reach each other again."""
        for host in self.hosts.values():
            host.netns.iptables("-F", CHAIN, check=False)
        if self.faults:
            log.info("network lab %s: healed", self.tag)
        self.faults.clear()

    # -- what is where ----------------------------------------------------------------------------
    def status(self) -> LabStatus:
        rules = {}
        for name, host in self.hosts.items():
            out = host.netns.iptables("-S", CHAIN, check=False).stdout.splitlines()
            rules[name] = [line for line in out if line.startswith("-A ")]
        cluster = self.cluster.status().describe() if self.cluster is not None else "(no cluster)"
        return LabStatus(tag=self.tag, subnet=self.subnet,
                         hosts={name: h.address for name, h in self.hosts.items()},
                         faults=[f.describe() for f in self.faults], rules=rules, cluster=cluster)
