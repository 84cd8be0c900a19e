"""Structural checks of the container stack: docker-compose.yaml and docker/.

CI has no Docker engine (and this machine's docker client has no compose
plugin), so the stack is never started here. These tests are the check
instead: they load the compose file with PyYAML, resolve `${VAR:-default}`
and `${VAR:?}` the way Compose does (with the defaults and a `.env` as
`make compose-env` writes it), and verify what would otherwise only fail at
`docker compose up`, plus what must never be there (a 0.0.0.0 bind, a
literal secret, a secret with a default):
services and their dependencies, build contexts and COPY sources, mounts,
the Kafka settings as the apache/kafka image turns them into
server.properties, and both Airflow connections parsed by Airflow's own code
(a subprocess with a throw-away AIRFLOW_HOME). When a compose-capable docker
client is present, `docker compose config` runs as well.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from eos_etl.kafka.acls import WATCH_GROUP_SUFFIX
from eos_etl.shop.job import DEFAULT_GROUP

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yaml"

AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)
REQUIRED_SERVICES = {"kafka-tls-init", "kafka", "kafka-init", "postgres", *AIRFLOW_SERVICES, "spark-master",
                     "spark-worker"}
ONE_SHOT = {"airflow-init", "kafka-tls-init", "kafka-init"}
DEPENDS_ON_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
# The compose env names the DAG code reads (eos_etl.orchestration.settings).
SPARK_CONN_ENV = "AIRFLOW_CONN_SPARK_DEFAULT"
KAFKA_CONN_ENV = "AIRFLOW_CONN_KAFKA_PURCHASES"
WATCH_CONN_ENV = "AIRFLOW_CONN_KAFKA_PURCHASES_WATCH"
# Env keys the apache/kafka image does not render into server.properties
# (docker/resources/common-scripts/kafka-propertiesSpec.json).
KAFKA_IMAGE_EXCLUDES = {
    "KAFKA_VERSION", "KAFKA_HEAP_OPT", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
}


# -- Compose-style interpolation -------------------------------------------------------
_VAR = re.compile(r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")


class MissingVariable(KeyError):
    pass


def interpolate(text: str, env: dict[str, str] | None = None, *, strict: bool = False) -> str:
    """Resolve `$$`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, `${VAR?err}` as Compose does.

    An unset variable without a default becomes "" (Compose warns and does
    the same), or raises MissingVariable when ``strict``. A required one
    (`:?`: unset or empty, `?`: unset) always raises: Compose stops there.
    """
    env = env or {}

    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("bare")
        op, arg = m.group("op"), m.group("arg") or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return arg if value is None else value
        if (op == ":?" and not value) or (op == "?" and value is None):
            raise MissingVariable(name)
        if value is None:
            if strict:
                raise MissingVariable(name)
            return ""
        return value

    return _VAR.sub(repl, text)


def resolve(node, env: dict[str, str] | None = None):
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, dict):
        return {k: resolve(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v, env) for v in node]
    return node


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


def compose_env_module():
    """scripts/compose_env.py, which `make compose-env` runs (not a package: loaded from its path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compose_env", ROOT / "scripts" / "compose_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_dotenv(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def dotenv() -> dict[str, str]:
    """A `.env` as `make compose-env` writes it: random secrets."""
    return parse_dotenv(compose_env_module().render())


@pytest.fixture(scope="module")
def compose(raw, dotenv) -> dict:
    """The compose model as `docker compose config` would see it after `make compose-env`."""
    return resolve(raw, dotenv)


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def published(service: dict) -> list[tuple[str, str, str]]:
    """(host address, host port, container port) of every published port; "" for an address not given
    (Compose then binds every interface)."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):  # long syntax
            out.append((str(port.get("host_ip", "")), str(port.get("published", "")), str(port.get("target"))))
            continue
        parts = str(port).split(":")
        if len(parts) == 1:
            parts = ["", "", parts[0]]  # a random host port, on every interface
        elif len(parts) == 2:
            parts = ["", *parts]
        out.append((":".join(parts[:-2]), parts[-2], parts[-1]))
    return out


def bind_mounts(service: dict) -> list[tuple[str, str, str]]:
    """(source, target, mode) of the short-syntax volumes."""
    out = []
    for v in service.get("volumes") or []:
        assert isinstance(v, str), f"long-syntax volume not expected here: {v!r}"
        parts = v.split(":")
        out.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "rw"))
    return out


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pins[re.sub(r"\[.*\]", "", name).lower()] = version
    return pins


def constraint_names() -> set[str]:
    return {
        re.split(r"[=<>!~ ]", line, maxsplit=1)[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }


# -- Dockerfile parsing -----------------------------------------------------------------
def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    logical, current = [], ""
    for line in path.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + "\n"
            continue
        logical.append(current + line)
        current = ""
    assert not current, f"{path} ends inside a line continuation"
    out = []
    for text in logical:
        instruction, _, args = text.strip().partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


def dockerfile_copies(path: Path) -> list[dict]:
    copies = []
    for instruction, args in dockerfile_instructions(path):
        if instruction not in ("COPY", "ADD"):
            continue
        words = args.split()
        flags = {w.split("=", 1)[0]: w.split("=", 1)[1] if "=" in w else "" for w in words if w.startswith("--")}
        paths = [w for w in words if not w.startswith("--")]
        copies.append({"from": flags.get("--from"), "sources": paths[:-1], "dest": paths[-1]})
    return copies


def dockerfile_stages(path: Path) -> list[tuple[str, str | None]]:
    """(resolved base image, stage name) per FROM, global ARG defaults applied."""
    args, stages = {}, []
    for instruction, rest in dockerfile_instructions(path):
        if instruction == "ARG" and not stages and "=" in rest:
            name, value = rest.split("=", 1)
            args[name.strip()] = value.strip()
        elif instruction == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append((image, name))
    return stages


def _glob_regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignored(rel_path: str, ignore_file: Path) -> bool:
    """Docker's rule: the last pattern matching the path, or one of its parent directories, decides."""
    rules = []
    for line in ignore_file.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rules.append((negate, _glob_regex(pattern)))
    parts = rel_path.strip("/").split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negate, regex in rules:
        if any(regex.match(c) for c in candidates):
            excluded = not negate
    return excluded


def build_of(service: dict) -> tuple[Path, Path]:
    build = service["build"]
    if isinstance(build, str):
        build = {"context": build}
    context = (ROOT / build.get("context", ".")).resolve()
    return context, (context / build.get("dockerfile", "Dockerfile")).resolve()


# -- the compose model ------------------------------------------------------------------
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|_KEY$")
REQUIRED_REF = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*):\?[^}]*\}")


def secret_values(raw: dict):
    """(where, raw text) of every place a secret sits in the compose file: environment values with a
    secret-like name (not *_FILE paths), passwords inside connection JSON, and passwords in URLs."""
    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{where}.{key}"
                if isinstance(value, str) and SECRET_NAME.search(str(key)) and not str(key).endswith(
                        ("_FILE", "_FILENAME", "_CREDENTIALS", "_DIR")) and not value.lstrip().startswith("{"):
                    yield here, value
                yield from walk(value, here)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{where}[{i}]")
        elif isinstance(node, str):
            for m in re.finditer(r'"password"\s*:\s*"((?:[^"\\]|\\.)*)"', node):
                yield f"{where} (JSON password)", m.group(1)
            for m in re.finditer(r"://[^/\s:@]+:(\$\{[^}]*\}|[^@\s]+)@", node):
                yield f"{where} (URL password)", m.group(1)
    yield from walk(raw, "")


def secret_problems(raw: dict) -> list[str]:
    """Every secret must be exactly one `${VAR:?}`: no literal, no default, no empty value."""
    return [f"{where}: {text!r}" for where, text in secret_values(raw) if not REQUIRED_REF.fullmatch(text)]


def exposed_ports(compose: dict) -> list[str]:
    return [f"{name}: {addr or '(every interface)'}:{host}:{target}" for name, service in compose["services"].items()
            for addr, host, target in published(service) if addr not in ("127.0.0.1", "localhost")]


def test_secrets_are_required_variables_without_defaults(raw, dotenv):
    """Every secret is `${VAR:?}` (compose stops when it is missing), never a literal or a default;
    the required ones are exactly what `make compose-env` writes and `.env.example` lists."""
    assert not secret_problems(raw), secret_problems(raw)
    required = {m.group("name") for text in strings(raw) for m in REQUIRED_REF.finditer(text)}
    assert required == set(compose_env_module().SECRETS) == set(dotenv)
    assert set(parse_dotenv((ROOT / ".env.example").read_text())) == required
    assert all(v == "" for v in parse_dotenv((ROOT / ".env.example").read_text()).values()), "a value in the example"
    with pytest.raises(MissingVariable):
        resolve(raw, {})  # no .env: compose refuses to start
    # Everything that is not a secret has a default: nothing else needs setting.
    missing = set()
    for text in strings(raw):
        try:
            interpolate(text, dotenv, strict=True)
        except MissingVariable as e:
            missing.add(e.args[0])
    assert not missing, f"variables without a default: {sorted(missing)}"
    ignored = [line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()]
    assert ".env" in ignored


@pytest.mark.parametrize("doctor, says", [
    (lambda t: t.replace("${POSTGRES_PASSWORD:?", "${POSTGRES_PASSWORD:-airflow", 1), "POSTGRES_PASSWORD"),
    (lambda t: t.replace("${AIRFLOW_FERNET_KEY:?set AIRFLOW_FERNET_KEY in .env (make compose-env)}",
                         "g0qxtO5jMglIMFThGVtc2TU5de_GA3bJD2c5mXfiCBU=", 1), "FERNET_KEY"),
    (lambda t: t.replace('"password": "${EOS_ETL_KAFKA_PASSWORD:?set EOS_ETL_KAFKA_PASSWORD in .env '
                         '(make compose-env)}"', '"password": "etl-secret"', 1), "JSON password"),
])
def test_the_secret_check_catches_a_literal_or_a_default(doctor, says):
    """The check above is not vacuous: a default, a literal key, a literal password in JSON are caught."""
    text = COMPOSE_FILE.read_text()
    doctored = doctor(text)
    assert doctored != text
    problems = secret_problems(yaml.safe_load(doctored))
    assert problems and any(says in p for p in problems), problems


def test_published_ports_bind_to_loopback_only(compose, raw, dotenv):
    assert not exposed_ports(compose), exposed_ports(compose)
    assert all(service.get("network_mode", "") in ("", "service:kafka") for service in compose["services"].values())
    # Spark's UIs and RPC, Postgres: not published at all.
    for name in ("spark-master", "spark-worker", "postgres"):
        assert not compose["services"][name].get("ports"), f"{name} publishes ports"
    # The check is not vacuous: a short "8080:8080" would bind every interface.
    doctored = yaml.safe_load(COMPOSE_FILE.read_text().replace(
        '"${EOS_ETL_PUBLISH_ADDRESS:-127.0.0.1}:${AIRFLOW_API_PORT:-8080}:8080"', '"8080:8080"', 1))
    assert exposed_ports(resolve(doctored, dotenv)) == ["airflow-apiserver: (every interface):8080:8080"]
    assert exposed_ports(resolve(raw, {**dotenv, "EOS_ETL_PUBLISH_ADDRESS": "0.0.0.0"}))  # a deliberate opt-in


def test_required_services_exist(services):
    assert REQUIRED_SERVICES <= set(services), f"missing services: {sorted(REQUIRED_SERVICES - set(services))}"


def test_depends_on_targets_exist_and_conditions_are_meaningful(services):
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert condition in DEPENDS_ON_CONDITIONS, f"{name} -> {target}: unknown condition {condition}"
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target} to be healthy, it has no healthcheck"
            if condition == "service_completed_successfully":
                assert target in ONE_SHOT, f"{name} waits for {target} to exit, but it is a long-running service"


def test_long_running_services_have_healthchecks_and_one_shots_do_not_restart(services):
    for name, service in services.items():
        if name in ONE_SHOT:
            assert str(service.get("restart", "no")) == "no", f"one-shot {name} must not restart"
        else:
            assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
            assert service.get("restart") in ("unless-stopped", "always", "on-failure"), f"{name} has no restart policy"


def test_every_service_has_an_image_or_a_build_whose_inputs_exist(services):
    for name, service in services.items():
        assert service.get("image") or service.get("build"), f"{name} has neither image nor build"
        if service.get("build"):
            context, dockerfile = build_of(service)
            assert context.is_dir(), f"{name}: build context {context} does not exist"
            assert dockerfile.is_file(), f"{name}: Dockerfile {dockerfile} does not exist"
            assert dockerfile.is_relative_to(context), f"{name}: Dockerfile outside the build context"


def test_bind_mounts_exist_and_named_volumes_are_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in services.items():
        for source, target, mode in bind_mounts(service):
            assert target.startswith("/"), f"{name}: mount target {target} is not absolute"
            assert mode in ("ro", "rw"), f"{name}: unexpected mount mode {mode}"
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: bind-mount source {source} does not exist"
            else:
                assert source in declared, f"{name}: named volume {source} is not declared"
                used.add(source)
    assert {"postgres-data", "kafka-data"} <= used
    assert not declared - used, f"declared but unused volumes: {sorted(declared - used)}"
    # The repository code is mounted into Airflow where the image keeps it.
    mounts = {(s, t) for s, t, _ in bind_mounts(services["airflow-scheduler"])}
    for folder in ("dags", "plugins", "include", "jobs"):
        assert (f"./{folder}", f"/opt/airflow/{folder}") in mounts, f"./{folder} is not mounted into Airflow"


def test_host_ports_are_unique(services):
    seen = {}
    for name, service in services.items():
        for _, host, _ in published(service):
            assert host not in seen, f"host port {host} used by {seen.get(host)} and {name}"
            seen[host] = name
    assert set(seen) == {"8080", "9094"}, "only the Airflow UI (8080) and Kafka's external listener (9094)"


# -- Airflow ----------------------------------------------------------------------------
def test_airflow_services_share_one_image_and_environment(raw, services, dotenv):
    text = COMPOSE_FILE.read_text()
    common = raw["x-airflow-common"]
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert service["image"] == services["airflow-init"]["image"], f"{name} runs another image"
        assert service["build"] == services["airflow-init"]["build"], f"{name} builds another image"
        # Same code and the same shared state: task logs, and run reports that
        # tasks (scheduler) write and the reports plugin (API server) serves.
        assert service["volumes"] == services["airflow-init"]["volumes"], f"{name} mounts other volumes"
        assert ("airflow-logs", "/opt/airflow/logs", "rw") in bind_mounts(service)
        assert ("eos-etl-var", "/opt/airflow/var", "rw") in bind_mounts(service)
        env = env_of(service)
        common_env = env_of(resolve(common, dotenv))
        assert {k: env.get(k) for k in common_env} == common_env, f"{name} does not carry the common environment"
        block = re.search(rf"^  {re.escape(name)}:\n((?:    .*\n|\n)*)", text, re.M)
        assert block and "<<: *airflow-common\n" in block.group(1), f"{name} does not use the x-airflow-common anchor"
    assert build_of(services["airflow-init"])[1] == ROOT / "docker" / "airflow.Dockerfile"


def test_airflow_components_and_commands(services):
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES}
    assert commands["airflow-scheduler"] == ["scheduler"]
    assert commands["airflow-dag-processor"] == ["dag-processor"]
    assert commands["airflow-triggerer"] == ["triggerer"]
    # api-server and init run scripts baked into the image (docker/airflow/*.sh).
    assert commands["airflow-apiserver"][-1] == "/usr/local/bin/eos-etl-airflow-api-server"
    assert commands["airflow-init"][-1] == "/usr/local/bin/eos-etl-airflow-init"
    assert published(services["airflow-apiserver"]) == [("127.0.0.1", "8080", "8080")]
    for name in AIRFLOW_SERVICES:
        if name != "airflow-init":
            assert depends_on(services[name]).get("airflow-init") == "service_completed_successfully", name


def test_airflow_database_is_the_postgres_service(services):
    env = env_of(services["airflow-scheduler"])
    url = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    pg = env_of(services["postgres"])
    assert url.scheme == "postgresql+psycopg2"
    assert url.hostname == "postgres" and url.hostname in services
    assert (url.port or 5432) == 5432
    assert url.username == pg["POSTGRES_USER"] and url.password == pg["POSTGRES_PASSWORD"]
    assert url.path.lstrip("/") == pg["POSTGRES_DB"]
    assert services["postgres"]["image"].startswith("postgres:16")
    for name in AIRFLOW_SERVICES:
        assert depends_on(services[name]).get("postgres") == "service_healthy", name


def test_airflow_core_settings(services, dotenv):
    env = env_of(services["airflow-scheduler"])
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false"
    api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert api.hostname == "airflow-apiserver" and api.port == 8080 and api.path == "/execution/"
    assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("SimpleAuthManager")
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"].startswith("/opt/airflow/")
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"):
        assert env[key], f"{key} must be set explicitly: every component has to share it"
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"].encode()) >= 64, "HS512 wants a key of at least 64 bytes"
    from cryptography.fernet import Fernet

    Fernet(env["AIRFLOW__CORE__FERNET_KEY"])  # a valid key, or Airflow refuses to encrypt connections
    assert env_of(services["airflow-apiserver"])["AIRFLOW_ADMIN_PASSWORD"] == dotenv["AIRFLOW_ADMIN_PASSWORD"]


def test_executor_matches_the_lock(services):
    """CeleryExecutor needs apache-airflow-providers-celery (+ redis, a worker); without it in the lock: LocalExecutor."""
    executor = env_of(services["airflow-scheduler"])["AIRFLOW__CORE__EXECUTOR"]
    if "apache-airflow-providers-celery" in constraint_names():
        assert executor == "CeleryExecutor"
        assert {"redis", "airflow-worker"} <= set(services)
    else:
        assert executor == "LocalExecutor"
        assert "airflow-worker" not in services
        # The scheduler runs the tasks, so it is the Spark driver and the Kafka client.
        deps = depends_on(services["airflow-scheduler"])
        assert deps.get("spark-master") == "service_healthy"
        assert deps.get("kafka-init") == "service_completed_successfully"
        assert deps.get("airflow-apiserver") == "service_healthy"


CA_FILE = "/opt/eos-etl/kafka-ca/ca.pem"
KAFKA_EXTRA = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl_ca_location": CA_FILE}


def test_connection_env_values_are_json(services, dotenv):
    env = env_of(services["airflow-scheduler"])
    spark = json.loads(env[SPARK_CONN_ENV])
    kafka = json.loads(env[KAFKA_CONN_ENV])
    assert spark["conn_type"] == "spark" and spark["extra"]["deploy-mode"] == "client"
    assert kafka["host"] == "kafka" and kafka["port"] == 9093 and kafka["login"] == "etl"
    assert kafka["password"] == dotenv["EOS_ETL_KAFKA_PASSWORD"]
    assert kafka["extra"] == KAFKA_EXTRA
    # The event-driven DAG's watcher: same login and CA, its own group (the `watcher` ACL role's).
    watch = json.loads(env[WATCH_CONN_ENV])
    assert watch["conn_type"] == "kafka" and watch["extra"]["sasl.password"] == dotenv["EOS_ETL_KAFKA_PASSWORD"]
    assert watch["extra"]["group.id"] == DEFAULT_GROUP + WATCH_GROUP_SUFFIX
    assert {k: watch["extra"][k] for k in ("bootstrap.servers", "sasl.username", "ssl.ca.location",
                                            "isolation.level")} == {
        "bootstrap.servers": "kafka:9093", "sasl.username": "etl", "ssl.ca.location": CA_FILE,
        "isolation.level": "read_committed"}


def _airflow_env(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
            # Never opened: connections resolve from the environment first.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'unused.db'}",
            "PYTHONPATH": str(ROOT / "include"),
        }
    )
    env.update(extra)
    return env


def test_airflow_parses_both_connections(services, dotenv, tmp_path):
    """Airflow's own deserializer (env backend -> Connection.from_json) and the Spark provider's master resolution."""
    compose_env = env_of(services["airflow-scheduler"])
    script = textwrap.dedent(
        """
        import json, sys
        from airflow.models.connection import Connection
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
        from eos_etl.orchestration.settings import KAFKA_CONN_ID, SPARK_CONN_ID, kafka_connection_from_airflow

        kafka = Connection.get_connection_from_secrets(KAFKA_CONN_ID)
        spark = SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection
        kc = kafka_connection_from_airflow(kafka)
        out = {
            "conn_ids": [SPARK_CONN_ID, KAFKA_CONN_ID],
            "kafka": {"conn_type": kafka.conn_type, "host": kafka.host, "port": kafka.port, "login": kafka.login,
                      "password": kafka.password, "extra": kafka.extra_dejson},
            "spark": {"master": spark["master"], "deploy_mode": spark["deploy_mode"], "binary": spark["spark_binary"]},
            "client": kc.client_config(),
        }
        open(sys.argv[1], "w").write(json.dumps(out))
        """
    )
    result_file = tmp_path / "result.json"
    env = _airflow_env(
        tmp_path, {SPARK_CONN_ENV: compose_env[SPARK_CONN_ENV], KAFKA_CONN_ENV: compose_env[KAFKA_CONN_ENV]}
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(result_file)], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(result_file.read_text())
    # The env names in the compose file are the ones the DAG code looks up.
    assert [f"AIRFLOW_CONN_{c.upper()}" for c in out["conn_ids"]] == [SPARK_CONN_ENV, KAFKA_CONN_ENV]
    password = dotenv["EOS_ETL_KAFKA_PASSWORD"]
    assert out["kafka"] == {
        "conn_type": "generic", "host": "kafka", "port": 9093, "login": "etl", "password": password,
        "extra": KAFKA_EXTRA,
    }
    assert out["spark"] == {"master": "spark://spark-master:7077", "deploy_mode": "client", "binary": "spark-submit"}
    assert out["client"] == {
        "bootstrap.servers": "kafka:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "etl", "sasl.password": password, "ssl.ca.location": CA_FILE,
    }


def _heredoc_python(script: Path) -> str:
    match = re.search(r"python - <<'EOF'\n(.*?)\nEOF\n", script.read_text(), re.S)
    assert match, f"{script} has no python heredoc"
    return match.group(1)


def test_airflow_init_check_runs_with_the_compose_connections(services, dotenv, tmp_path):
    """The connection check airflow-init runs (docker/airflow/init.sh), executed as is."""
    compose_env = env_of(services["airflow-init"])
    env = _airflow_env(
        tmp_path, {SPARK_CONN_ENV: compose_env[SPARK_CONN_ENV], KAFKA_CONN_ENV: compose_env[KAFKA_CONN_ENV]}
    )
    code = _heredoc_python(ROOT / "docker" / "airflow" / "init.sh")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "master=spark://spark-master:7077 deploy-mode=client" in proc.stdout
    assert "KafkaConnection(kafka:9093, SASL_SSL, sasl=SCRAM-SHA-512:etl:***)" in proc.stdout
    assert dotenv["EOS_ETL_KAFKA_PASSWORD"] not in proc.stdout + proc.stderr


def test_api_server_script_writes_the_login(services, tmp_path):
    env = env_of(services["airflow-apiserver"])
    passwords = tmp_path / "passwords.json"
    run_env = {
        "PATH": os.environ["PATH"],
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"],
        "AIRFLOW_ADMIN_PASSWORD": env["AIRFLOW_ADMIN_PASSWORD"],
    }
    code = _heredoc_python(ROOT / "docker" / "airflow" / "api-server.sh")
    proc = subprocess.run([sys.executable, "-c", code], env=run_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(passwords.read_text()) == {"admin": env["AIRFLOW_ADMIN_PASSWORD"]}
    assert passwords.stat().st_mode & 0o777 == 0o600


# -- Kafka ------------------------------------------------------------------------------
def kafka_property_name(env_key: str) -> str:
    """The apache/kafka image's rule (utility ConvertKey): _ -> ., __ -> _, ___ -> -, lower case."""
    key = env_key[len("KAFKA_"):]
    key = re.sub(r"[^_]_[^_]", lambda m: m.group(0).replace("_", "."), key)
    return key.replace("___", "-").replace("__", "_").lower()


def rendered_kafka_properties(env: dict[str, str]) -> dict[str, str]:
    props = {}
    for key, value in env.items():
        if key.startswith("KAFKA_") and key not in KAFKA_IMAGE_EXCLUDES and len(f"{key}={value}".split("=")) == 2:
            props[kafka_property_name(key)] = value
    return props


def listeners(value: str) -> dict[str, tuple[str, int]]:
    out = {}
    for item in value.split(","):
        name, _, hostport = item.partition("://")
        host, _, port = hostport.rpartition(":")
        out[name] = (host, int(port))
    return out


def test_kafka_env_renders_the_broker_settings(services):
    kafka = services["kafka"]
    assert kafka["image"] == "apache/kafka:4.1.1"
    env = env_of(kafka)
    # The image silently drops any KAFKA_* value containing '=' (it splits env entries on '=').
    dropped = [k for k, v in env.items() if k.startswith("KAFKA_") and k not in KAFKA_IMAGE_EXCLUDES and "=" in v]
    assert not dropped, f"the apache/kafka image would ignore {dropped}"
    props = rendered_kafka_properties(env)
    expected = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        "ssl.keystore.type": "PKCS12",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": "false",
        "log.dirs": "/var/lib/kafka/data",
    }
    assert {k: props.get(k) for k in expected} == expected
    assert env["CLUSTER_ID"] and len(env["CLUSTER_ID"]) == 22, "KRaft needs a base64 UUID cluster id"
    assert int(props["transaction.max.timeout.ms"]) >= 120_000, "below the pipeline's default transaction timeout"


def test_kafka_listeners(services):
    """Clients only over SASL_SSL; PLAINTEXT (the super-user's) only on the container's own loopback."""
    env = env_of(services["kafka"])
    bound = listeners(env["KAFKA_LISTENERS"])
    advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    protocol = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(bound) <= set(protocol) and set(advertised) <= set(bound)
    assert "CONTROLLER" in bound and "CONTROLLER" not in advertised
    for name, (host, _) in bound.items():
        if protocol[name] != "SASL_SSL":
            assert host == "127.0.0.1", f"{name} ({protocol[name]}) is reachable beyond the container's loopback"
    assert advertised["INTERNAL"] == ("127.0.0.1", 9092) and protocol["INTERNAL"] == "PLAINTEXT"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert advertised["SASL_SSL"] == ("kafka", 9093) and protocol["SASL_SSL"] == "SASL_SSL"
    external = [name for name, (host, _) in advertised.items() if host == "localhost"]
    assert len(external) == 1 and advertised[external[0]][1] == 9094 and protocol[external[0]] == "SASL_SSL"
    assert published(services["kafka"]) == [("127.0.0.1", "9094", "9094")], "published as advertised, on loopback"
    voter_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert voter_id == env["KAFKA_NODE_ID"] and voter == f"127.0.0.1:{bound['CONTROLLER'][1]}"
    assert services["kafka"].get("hostname") == "kafka"
    # The data directory is the named volume.
    assert ("kafka-data", env["KAFKA_LOG_DIRS"], "rw") in bind_mounts(services["kafka"])
    # The healthcheck talks to the loopback PLAINTEXT listener.
    assert "127.0.0.1:9092" in " ".join(services["kafka"]["healthcheck"]["test"])


def test_kafka_tls_files_reach_the_broker_and_the_ca_every_client(services):
    """kafka-tls-init writes the keystore (broker only) and ca.pem (every Kafka client, read-only)."""
    init, kafka = services["kafka-tls-init"], services["kafka"]
    assert init["image"] == kafka["image"], "keytool comes from the broker image's JRE"
    assert depends_on(kafka).get("kafka-tls-init") == "service_completed_successfully"
    init_env, kafka_env = env_of(init), env_of(kafka)
    init_mounts = {t: s for s, t, _ in bind_mounts(init)}
    assert init_mounts[init_env["KAFKA_SECRETS_DIR"]] == "kafka-secrets"
    assert init_mounts[init_env["KAFKA_CA_DIR"]] == "kafka-ca"
    assert ("kafka-secrets", "/etc/kafka/secrets", "ro") in bind_mounts(kafka)  # the image's fixed location
    assert {kafka_env[k] for k in ("KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_CREDENTIALS",
                                   "KAFKA_SSL_KEY_CREDENTIALS")} == {"broker.p12", "keystore_creds", "key_creds"}
    assert set(init_env["KAFKA_TLS_HOSTS"].split(",")) == {"kafka", "localhost"}  # the names clients dial
    ca_dir = CA_FILE.rsplit("/", 1)[0]
    for name, service in services.items():
        mounts = bind_mounts(service)
        if name.startswith(("airflow-", "spark-")):
            assert ("kafka-ca", ca_dir, "ro") in mounts, f"{name} cannot verify the broker"
        if name not in ("kafka-tls-init", "kafka"):
            assert "kafka-secrets" not in {s for s, _, _ in mounts}, f"{name} can read the broker's keystore"
    assert env_of(services["airflow-scheduler"])["EOS_ETL_KAFKA_SSL_CA_LOCATION"] == CA_FILE


def test_kafka_scram_login_matches_the_airflow_connection(services):
    env = env_of(services["kafka"])
    opts = dict(re.findall(r"-D([^=\s]+)=(\S*)", env["KAFKA_OPTS"]))
    assert set(opts) == {"java.security.auth.login.config"}, "nothing but the JAAS file's path in KAFKA_OPTS"
    sources = {target: source for source, target, _ in bind_mounts(services["kafka"])}
    jaas_target = opts["java.security.auth.login.config"]
    assert jaas_target in sources, "the JAAS file named in KAFKA_OPTS is not mounted"
    entries = re.sub(r"//.*", "", (ROOT / sources[jaas_target]).read_text())
    assert "KafkaServer {" in entries and "ScramLoginModule required;" in entries
    assert "password" not in entries.lower() and "user_" not in entries, "the JAAS file must hold no credentials"
    conn = json.loads(env_of(services["airflow-scheduler"])[KAFKA_CONN_ENV])
    advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    assert advertised["SASL_SSL"] == (conn["host"], conn["port"]), "the connection must point at the SASL_SSL listener"
    assert conn["extra"]["sasl_mechanism"] == env["KAFKA_SASL_ENABLED_MECHANISMS"]
    # kafka-init creates exactly this login.
    init = env_of(services["kafka-init"])
    assert (init["EOS_ETL_PIPELINE_USER"], init["EOS_ETL_PIPELINE_PASSWORD"]) == (conn["login"], conn["password"])
    assert env_of(services["airflow-scheduler"])["EOS_ETL_KAFKA_PASSWORD"] == conn["password"]


def test_kafka_init_runs_as_the_super_user_on_the_brokers_loopback(services):
    init = services["kafka-init"]
    assert init.get("network_mode") == "service:kafka", "127.0.0.1 must be the broker's own loopback"
    assert init["image"] == services["airflow-init"]["image"], "eos-etl comes from the Airflow image"
    assert depends_on(init) == {"kafka": "service_healthy"}
    bound = listeners(env_of(services["kafka"])["KAFKA_LISTENERS"])
    assert env_of(init)["EOS_ETL_BOOTSTRAP_SERVERS"] == "{}:{}".format(*bound["INTERNAL"])
    assert env_of(services["kafka"])["KAFKA_SUPER_USERS"] == "User:ANONYMOUS"
    sources = {target: source for source, target, _ in bind_mounts(init)}
    assert sources[init["command"][-1]] == "./docker/kafka/init-kafka.sh"


def test_kafka_init_script_sets_up_a_working_least_privilege_login(kafka_broker):
    """docker/kafka/init-kafka.sh, run as is against a real broker's super-user listener: the user logs in
    over SASL_SSL, the shop's topics exist, and the user holds exactly the pipeline, validator and watcher ACLs."""
    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.shop.job import ShopSettings
    from eos_etl.shop.schema import ShopTopics

    from .conftest import unique
    from .test_acls import acls_of

    user, password = unique("compose-etl"), f"pw-{unique('x')}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "EOS_ETL_BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers, "EOS_ETL_PIPELINE_USER": user,
           "EOS_ETL_PIPELINE_PASSWORD": password, "EOS_ETL_PARTITIONS": "2"}
    for name in ("EOS_ETL_KAFKA_SECURITY_PROTOCOL", "EOS_ETL_KAFKA_SASL_MECHANISM", "EOS_ETL_KAFKA_USERNAME",
                 "EOS_ETL_KAFKA_PASSWORD", "EOS_ETL_KAFKA_SSL_CA_LOCATION"):
        env.pop(name, None)
    for _ in range(2):  # idempotent: it runs on every `docker compose up`
        proc = subprocess.run(["bash", str(ROOT / "docker" / "kafka" / "init-kafka.sh")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert password not in proc.stdout + proc.stderr
    login = KafkaConnection(kafka_broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", user, password,
                            str(kafka_broker.ca_file))
    ClusterAdmin(login).check_reachable()
    topics = ShopTopics()
    admin = ClusterAdmin(KafkaConnection(kafka_broker.bootstrap_servers))
    assert {t: len(admin.partitions(t)) for t in (topics.purchases, topics.invoices, topics.shipments,
                                                 topics.dead_letters)} == {
        topics.purchases: 2, topics.invoices: 2, topics.shipments: 2, topics.dead_letters: 1}
    resources = ShopSettings(connection=login).pipeline().resources()
    kinds = {"cluster": "BROKER"}  # confluent-kafka's name of Kafka's cluster resource
    expected = {(kinds.get(g.resource, g.resource.upper().replace("-", "_")), g.name,
                 "PREFIXED" if g.prefixed else "LITERAL",
                 g.operation, "ALLOW") for role in ("pipeline", "validator", "watcher") for g in resources.grants(role)}
    assert acls_of(KafkaConnection(kafka_broker.bootstrap_servers), f"User:{user}") == expected


def test_kafka_tls_script_makes_a_keystore_a_real_broker_serves(tmp_path):
    """docker/kafka/make-tls.sh (keytool), run as is; a Kafka broker then serves SASL_SSL with its PKCS12
    keystore, and a client verifying against its ca.pem (host name included) logs in."""
    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.kafka.errors import BrokerUnreachableError
    from eos_etl.stack.kafka_cluster import KafkaCluster
    from eos_etl.stack.tls import ensure_broker_tls
    from eos_etl.stack.tools import free_port

    secrets_dir, ca_dir = tmp_path / "secrets", tmp_path / "ca"
    env = {**os.environ, "KAFKA_SECRETS_DIR": str(secrets_dir), "KAFKA_CA_DIR": str(ca_dir),
           "KAFKA_TLS_HOSTS": "127.0.0.1,localhost"}
    script = ROOT / "docker" / "kafka" / "make-tls.sh"
    made = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    password = (secrets_dir / "keystore_creds").read_text()
    assert len(password) >= 32 and (secrets_dir / "key_creds").read_text() == password
    for name in ("broker.p12", "keystore_creds", "key_creds"):
        assert (secrets_dir / name).stat().st_mode & 0o777 == 0o400, name
    assert (ca_dir / "ca.pem").stat().st_mode & 0o777 == 0o444
    assert password not in made.stdout + made.stderr
    again = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "keeping" in again.stdout
    assert (secrets_dir / "keystore_creds").read_text() == password

    user, user_password = "etl", "compose-tls-check-password"
    broker = KafkaCluster(home=tmp_path / "kafka", port=free_port(), sasl_users={user: user_password}, overrides={
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": str(secrets_dir / "broker.p12"),
        "listener.name.sasl_ssl.ssl.keystore.password": password,
        "listener.name.sasl_ssl.ssl.key.password": password,
    })
    broker.start()
    try:
        def login(ca: Path) -> ClusterAdmin:
            return ClusterAdmin(KafkaConnection(broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", user,
                                                user_password, str(ca)), timeout=5, retry_deadline_s=10)

        login(ca_dir / "ca.pem").check_reachable()
        with pytest.raises(BrokerUnreachableError):  # another CA did not sign it: no handshake, no password sent
            login(ensure_broker_tls(tmp_path / "other-ca").ca_file).check_reachable()
    finally:
        broker.stop()


# -- Spark ------------------------------------------------------------------------------
def test_spark_cluster(services):
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["image"] == worker["image"] and master["build"] == worker["build"]
    assert build_of(master)[1] == ROOT / "docker" / "spark.Dockerfile"
    cmd = master["command"]
    assert cmd[:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master"]
    opts = dict(zip(cmd[2::2], cmd[3::2]))
    master_url = f"spark://{opts['--host']}:{opts['--port']}"
    assert opts["--host"] == master.get("hostname") == "spark-master"
    assert worker["command"][:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert worker["command"][-1] == master_url
    spark_conn = json.loads(env_of(services["airflow-scheduler"])[SPARK_CONN_ENV])
    assert f"{spark_conn['host']}:{spark_conn['port']}" == master_url
    assert depends_on(worker).get("spark-master") == "service_healthy"
    # Executors import the same eos_etl as the driver.
    assert ("./include", "/opt/eos-etl/include", "ro") in bind_mounts(worker)
    # Neither the UIs nor the RPC port are published (the loopback check covers every service).
    assert not master.get("ports") and not worker.get("ports")


# -- Dockerfiles ------------------------------------------------------------------------
DOCKERFILES = ("airflow.Dockerfile", "spark.Dockerfile")


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile_copy_sources_exist_and_reach_the_build(name):
    dockerfile = ROOT / "docker" / name
    ignore_file = dockerfile.with_name(dockerfile.name + ".dockerignore")
    assert ignore_file.is_file(), "without it the whole checkout (.venv, .cache) is sent to the builder"
    stages = [stage for _, stage in dockerfile_stages(dockerfile)]
    copies = dockerfile_copies(dockerfile)
    assert copies
    for copy in copies:
        if copy["from"]:
            assert copy["from"] in stages, f"COPY --from={copy['from']}: no such stage"
            continue
        for source in copy["sources"]:
            assert (ROOT / source).exists(), f"{name}: COPY source {source} does not exist"
            assert not dockerignored(source, ignore_file), f"{name}: COPY source {source} is excluded by {ignore_file.name}"
            if (ROOT / source).is_dir():
                kept = [p for p in (ROOT / source).rglob("*.py") if not dockerignored(str(p.relative_to(ROOT)), ignore_file)]
                assert kept or not list((ROOT / source).rglob("*.py")), f"{name}: everything in {source} is ignored"
        if len(copy["sources"]) > 1:
            assert copy["dest"].endswith("/"), f"{name}: COPY of several files needs a directory destination"
    for junk in (".venv/bin/python", ".cache/jars", "var", "include/eos_etl/__pycache__/x.pyc"):
        assert dockerignored(junk, ignore_file), f"{junk} would be sent to the builder"


def test_dockerfile_versions_match_the_pins():
    pins = requirement_pins()
    (airflow_base, _), = [s for s in dockerfile_stages(ROOT / "docker" / "airflow.Dockerfile") if s[1] is None]
    match = re.fullmatch(r"apache/airflow:(\d+\.\d+\.\d+)-python(\d+\.\d+)", airflow_base)
    assert match, airflow_base
    assert match.group(1) == pins["apache-airflow"], "the base image must be the pinned Airflow"
    airflow_python = match.group(2)
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert tuple(map(int, airflow_python.split("."))) >= tuple(map(int, requires.lstrip(">=").split(".")))
    # Executors must run the driver's Python minor version (PySpark refuses a mismatch).
    (spark_base, _), = dockerfile_stages(ROOT / "docker" / "spark.Dockerfile")
    assert re.fullmatch(rf"python:{re.escape(airflow_python)}-slim-\w+", spark_base), spark_base
    from eos_etl.stack.versions import SPARK_VERSION

    assert pins["pyspark"] == SPARK_VERSION, "pyspark pin and the Spark version of the connector jars differ"


def test_executor_python_path_matches_the_driver():
    """The driver sends spark.pyspark.python = its sys.executable; the Spark image must have that interpreter."""
    airflow_df = (ROOT / "docker" / "airflow.Dockerfile").read_text()
    spark_df = (ROOT / "docker" / "spark.Dockerfile").read_text()
    (driver_python,) = set(re.findall(r"sys\.executable == '([^']+)'", airflow_df))
    venv = re.search(r"python -m venv (\S+);", spark_df).group(1)
    assert f"{venv}/bin/python" == driver_python
    assert f"PYSPARK_PYTHON={driver_python}" in spark_df
    assert f"sys.executable == '{driver_python}'" in spark_df
    from eos_etl.stack.spark import spark_submit_conf

    assert "spark.pyspark.python" in spark_submit_conf(), "if the driver stops sending it, this pairing is moot"


def test_connector_jar_stage_needs_only_the_files_it_copies(tmp_path):
    """The jars stage copies a handful of modules; they alone must import (stdlib only, no site-packages)."""
    dockerfile = ROOT / "docker" / "airflow.Dockerfile"
    copies = [c for c in dockerfile_copies(dockerfile) if c["dest"].startswith("include/eos_etl")]
    assert copies, "the connector-jars stage copies nothing from include/"
    for copy in copies:
        for source in copy["sources"]:
            target = tmp_path / copy["dest"] / Path(source).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / source, target)
    code = (
        "from eos_etl.stack import maven; from eos_etl.stack.versions import SPARK_KAFKA; "
        "print(SPARK_KAFKA.name, len(SPARK_KAFKA.artifacts))"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(tmp_path / "include"), "PATH": os.environ["PATH"]},
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("spark-kafka-")


def test_shell_scripts_parse():
    bash = shutil.which("bash")
    assert bash, "bash is needed to check the entrypoint scripts"
    scripts = sorted((ROOT / "docker").rglob("*.sh"))
    assert len(scripts) >= 3
    for script in scripts:
        assert script.read_text().startswith("#!/usr/bin/env bash\n"), script
        proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


# -- the real thing, where it exists ----------------------------------------------------
def _compose_available() -> bool:
    docker = shutil.which("docker")
    if not docker:
        return False
    proc = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    return proc.returncode == 0


def test_docker_compose_config():
    if not _compose_available():
        pytest.skip(
            "no `docker compose` here (client without the compose plugin, no engine): "
            "the structural tests above are the check of docker-compose.yaml"
        )
    env_file = ROOT / "var" / "compose-config-test.env"
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_text(compose_env_module().render())
    proc = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
