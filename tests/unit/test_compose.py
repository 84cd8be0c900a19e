"""docker-compose.yaml and docker/, checked without starting anything (`make compose-check` runs them).

The compose file is rendered by Compose itself (`config`: Debian's docker-compose v1, or `docker
compose` v2 where installed; `make setup` installs v1 when it can; no Docker engine needed) with a
`.env` as `make compose-env` writes it (read back with python-dotenv, Compose v1's own reader).
What it renders is checked for what must hold and would otherwise only show at `up`: nothing
published beyond 127.0.0.1, every secret required and without a default, healthchecks, restart
policies and start order, the connections the DAGs use (parsed by Airflow's and pyspark's own
code), Spark's RPC authentication, the Spark Connect TLS endpoint, and the broker configured as the
embedded one. docker/Dockerfile is read with a Dockerfile parser (dockerfile-parse) and its build
context made by the Docker SDK's own .dockerignore rules (what Compose v1 sends to the builder):
every file a COPY takes is there, and nothing secret or bulky is. The scripts the images run are
run here where they can be without a broker: the Spark entry point, the API server's login. The TLS
script (a real broker serves its keystore; a TLS handshake with its Connect certificate) and
kafka-init against a real broker: tests/integration/test_compose.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from docker.utils.build import PatternMatcher, exclude_paths
from dockerfile_parse import DockerfileParser
from dockerfile_parse.parser import image_from
from dotenv import dotenv_values

from eos_etl.kafka.grants import WATCH_GROUP_SUFFIX
from eos_etl.shop.settings import DEFAULT_GROUP
from tests.support import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
ONE_SHOT = {"tls-init", "kafka-init", "airflow-init"}
SERVICES = ONE_SHOT | {"kafka", "postgres", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                       "airflow-triggerer", "spark-connect", "spark-master", "spark-worker"}
AIRFLOW_SERVICES = {"airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer"}
CA_FILE = "/opt/eos-etl/ca/ca.pem"
KAFKA_EXTRA = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl_ca_location": CA_FILE}
# Variables the tests set themselves: a value in the caller's environment would win over the .env.
COMPOSE_VARS = re.compile(r"^(COMPOSE_|EOS_ETL_|AIRFLOW_|KAFKA_|SPARK_|POSTGRES_)")


def compose_env_module():
    """scripts/compose_env.py, which `make compose-env` runs (not a package: loaded from its path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compose_env", ROOT / "scripts" / "compose_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SECRETS = tuple(compose_env_module().SECRETS)


def parse_dotenv(text: str) -> dict[str, str]:
    """A `.env` as Compose v1 reads it (python-dotenv), values taken literally."""
    return {k: v or "" for k, v in dotenv_values(stream=io.StringIO(text), interpolate=False).items()}


# -- Compose itself --------------------------------------------------------------------------
def compose_tool() -> list[str]:
    """Compose v2 when the docker client has it, else Debian's docker-compose (v1); a clear failure
    when neither is there (never a skip: `make setup` installs docker-compose as root)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("Compose is missing: these tests render docker-compose.yaml with it (no engine needed). "
                "Install Debian's package: apt-get install --no-install-recommends docker-compose (make setup "
                "does it as root)")


def compose(env_file: Path, *args: str, extra_env: dict | None = None, file: Path = COMPOSE_FILE
            ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not COMPOSE_VARS.match(k)}
    env.update(extra_env or {})
    return subprocess.run([*compose_tool(), "--project-directory", str(ROOT), "-f", str(file), "--env-file",
                           str(env_file), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def render(env_file: Path, extra_env: dict | None = None, file: Path = COMPOSE_FILE) -> dict:
    proc = compose(env_file, "config", extra_env=extra_env, file=file)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return yaml.safe_load(proc.stdout)


@pytest.fixture(scope="module")
def dotenv() -> dict[str, str]:
    """A `.env` as `make compose-env` writes it: random secrets."""
    return parse_dotenv(compose_env_module().render())


@pytest.fixture(scope="module")
def env_file(tmp_path_factory, dotenv) -> Path:
    path = tmp_path_factory.mktemp("compose") / ".env"
    path.write_text("".join(f"{k}={v}\n" for k, v in dotenv.items()))
    return path


@pytest.fixture(scope="module")
def config(env_file) -> dict:
    return render(env_file)


@pytest.fixture(scope="module")
def services(config) -> dict:
    return config["services"]


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
    """(host address, host port, container port) of every published port, from either Compose's
    rendering (v1: "127.0.0.1:8080:8080/tcp", v2: long syntax); "" for no address (every interface)."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            out.append((str(port.get("host_ip", "")), str(port.get("published", "")), str(port["target"])))
            continue
        parts = str(port).split("/")[0].split(":")
        parts = ["", "", *parts][-3:] if len(parts) < 3 else [":".join(parts[:-2]), *parts[-2:]]
        out.append((parts[0], parts[1], parts[2]))
    return out


def mounts(service: dict) -> dict[str, tuple[str, bool]]:
    """target -> (source, read only), from either rendering."""
    out = {}
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            out[v["target"]] = (str(v.get("source", "")), bool(v.get("read_only")))
        else:
            source, target, *mode = v.split(":")
            out[target] = (source, bool(mode) and mode[0] == "ro")
    return out


# -- docker/Dockerfile and its build context ---------------------------------------------------
def dockerfile_values(instruction: str) -> list[str]:
    """The arguments of every ``instruction`` of docker/Dockerfile, continuation lines joined."""
    return [i["value"] for i in DockerfileParser(str(DOCKERFILE)).structure if i["instruction"] == instruction]


def dockerfile_stages() -> list[str]:
    return [image_from(value)[1] for value in dockerfile_values("FROM")]


def dockerfile_args() -> dict[str, str]:
    """Every ARG's default, from any stage."""
    return {k: v for context in DockerfileParser(str(DOCKERFILE)).context_structure for k, v in context.args.items()}


def copy_sources() -> list[str]:
    """The build-context paths the COPY instructions take (not those copied from another stage)."""
    sources = []
    for value in dockerfile_values("COPY"):
        words = json.loads(value) if value.startswith("[") else value.split()
        if not any(w.startswith("--from=") for w in words):
            sources += [w for w in words if not w.startswith("--")][:-1]  # the last is the destination
    return sources


def dockerignore() -> list[str]:
    """.dockerignore's patterns, as the Docker SDK's build reads the file (blank and comment lines out)."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def build_context(patterns: list[str]) -> set[str]:
    """What a build of docker/Dockerfile sends to the builder: the files and folders the Docker SDK
    (what Compose v1 builds with) keeps under ``patterns``."""
    return exclude_paths(str(ROOT), list(patterns), dockerfile="docker/Dockerfile")


# -- secrets -----------------------------------------------------------------------------------
REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?[^}]*\}")


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        node = [*node.keys(), *node.values()]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [node] if isinstance(node, str) else []


def references(text: str):
    """The `${...}` in the compose file's keys and values, as a YAML parser reads them (comments left out)."""
    for value in _strings(yaml.safe_load(text)):
        yield from REFERENCE.finditer(value.replace("$$", ""))  # `$$` is a literal dollar, no reference


def secret_problems(text: str) -> list[str]:
    """A secret referenced in the compose file in any form but `${NAME:?...}`: a default, an
    alternative or a bare `${NAME}` would let Compose start without it."""
    return [f"{m.group(0)[:60]}: a secret must be ${{{m.group('name')}:?...}}"
            for m in references(text) if m.group("name") in SECRETS and m.group("op") != ":?"]


def test_every_secret_is_required_and_compose_refuses_to_start_without_it(env_file, dotenv, tmp_path):
    text = COMPOSE_FILE.read_text()
    assert not secret_problems(text), secret_problems(text)
    required = {m.group("name") for m in references(text) if m.group("op") == ":?"}
    assert required == set(SECRETS)
    example = parse_dotenv((ROOT / ".env.example").read_text())
    assert set(example) == required and not any(example.values()), "the example lists every secret, empty"
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
    for name in SECRETS:
        partial = tmp_path / f"without-{name}.env"
        partial.write_text("".join(f"{k}={v}\n" for k, v in dotenv.items() if k != name))
        proc = compose(partial, "config", "-q")
        assert proc.returncode != 0, f"Compose started without {name}"
        assert name in proc.stderr and "make compose-env" in proc.stderr, proc.stderr[-2000:]
        assert not any(v in proc.stderr for k, v in dotenv.items() if k in SECRETS), "an error showed a secret"


@pytest.mark.parametrize("doctor", [
    lambda t: t.replace("${POSTGRES_PASSWORD:?", "${POSTGRES_PASSWORD:-airflow", 1),
    lambda t: t.replace("${SPARK_CONNECT_TOKEN:?set SPARK_CONNECT_TOKEN in .env (make compose-env)}",
                        "${SPARK_CONNECT_TOKEN}", 1),
    lambda t: t.replace("${SPARK_AUTH_SECRET:?", "${SPARK_AUTH_SECRET-", 1),
])
def test_the_secret_check_catches_a_default_or_an_optional_secret(doctor):
    text = COMPOSE_FILE.read_text()
    assert doctor(text) != text and secret_problems(doctor(text))


def test_compose_env_writes_every_secret_and_adds_missing_ones_to_an_old_file(tmp_path):
    script = [sys.executable, str(ROOT / "scripts" / "compose_env.py")]
    fresh = tmp_path / "fresh.env"
    assert subprocess.run([*script, str(fresh)], capture_output=True, text=True).returncode == 0
    values = parse_dotenv(fresh.read_text())
    assert set(SECRETS) <= set(values) and all(len(values[name]) >= 24 for name in SECRETS)
    assert values["COMPOSE_PROJECT_NAME"] == "eos-etl"
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    old = tmp_path / "old.env"
    old.write_text("POSTGRES_PASSWORD=kept-as-it-is\nAIRFLOW_ADMIN_PASSWORD=\n")
    old.chmod(0o600)
    proc = subprocess.run([*script, str(old)], capture_output=True, text=True)
    assert proc.returncode == 0 and "kept-as-it-is" not in proc.stderr
    again = parse_dotenv(old.read_text().replace("AIRFLOW_ADMIN_PASSWORD=\n", "", 1))
    assert again["POSTGRES_PASSWORD"] == "kept-as-it-is" and set(SECRETS) <= set(again)
    before = old.read_text()
    assert subprocess.run([*script, str(old)], capture_output=True, text=True).returncode == 0
    assert old.read_text() == before  # complete: never rewritten


# -- what runs, in which order -------------------------------------------------------------------
def test_services_images_and_builds(services):
    assert set(services) == SERVICES
    targets = {}
    for name, service in services.items():
        build = service.get("build")
        assert build, f"{name} has no build: every image is built here"
        assert Path(build["context"]) == ROOT and build["dockerfile"] in ("docker/Dockerfile",
                                                                          str(ROOT / "docker/Dockerfile"))
        assert build["args"] == {"BASE_IMAGE": "debian:bookworm-slim"}  # the one image a build pulls
        targets.setdefault(build["target"], set()).add(service["image"])
    assert targets == {"airflow": {"eos-etl-airflow:local"}, "spark": {"eos-etl-spark:local"},
                       "kafka": {"eos-etl-kafka:local"}, "postgres": {"eos-etl-postgres:local"}}
    assert set(targets) <= set(dockerfile_stages())


def test_every_file_a_copy_takes_is_in_the_build_context_and_nothing_secret_or_bulky_is():
    context = build_context(dockerignore())
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    sources = copy_sources()
    assert "include/eos_etl/jars/maven.py" in sources and "include/eos_etl/" in sources  # the jars stage, the package
    left_out = []
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"docker/Dockerfile copies {source}, which does not exist"
        files = [f for f in tracked if f.startswith(source)] if path.is_dir() else [source]
        assert files, source
        left_out += [f for f in files if f not in context]
    assert not left_out, f".dockerignore leaves out what docker/Dockerfile copies: {left_out}"
    ignored = PatternMatcher(dockerignore())
    for path in (".env", ".venv", ".cache", "var", ".git", "include/eos_etl/__pycache__/cli.cpython-311.pyc",
                 "include/eos_etl_lab/faults/soak.py"):
        assert ignored.matches(path), f"{path} would be sent to the builder"
    # Not vacuous: a pattern that drops a module the jars stage copies is seen.
    assert "include/eos_etl/jars/maven.py" not in build_context(dockerignore() + ["include/eos_etl/jars/maven.py"])


def test_base_image_is_a_build_argument(env_file):
    rendered = render(env_file, {"EOS_ETL_BASE_IMAGE": "eos-etl-base:bookworm"})
    assert {s["build"]["args"]["BASE_IMAGE"] for s in rendered["services"].values()} == {"eos-etl-base:bookworm"}


def test_published_ports_bind_to_loopback_only(services, env_file, tmp_path):
    ports = {name: published(s) for name, s in services.items() if s.get("ports")}
    assert ports == {"airflow-apiserver": [("127.0.0.1", "8080", "8080")], "kafka": [("127.0.0.1", "9094", "9094")]}
    assert {s.get("network_mode") for s in services.values()} <= {None, "service:kafka"}
    # Other ports for a machine where 8080 and 9094 are taken; the broker advertises the one published.
    moved = render(env_file, {"AIRFLOW_API_PORT": "18080", "KAFKA_EXTERNAL_PORT": "19094"})["services"]
    assert published(moved["airflow-apiserver"]) == [("127.0.0.1", "18080", "8080")]
    assert published(moved["kafka"]) == [("127.0.0.1", "19094", "9094")]
    assert env_of(moved["kafka"])["KAFKA_EXTERNAL_PORT"] == "19094"
    # Every interface only when asked for.
    opened = render(env_file, {"EOS_ETL_PUBLISH_ADDRESS": "0.0.0.0"})["services"]
    assert published(opened["kafka"])[0][0] == "0.0.0.0"
    # The parsing above is not vacuous: a short "8080:8080" binds every interface.
    doctored = tmp_path / "docker-compose.yaml"
    doctored.write_text(COMPOSE_FILE.read_text().replace(
        '"${EOS_ETL_PUBLISH_ADDRESS:-127.0.0.1}:${AIRFLOW_API_PORT:-8080}:8080"', '"8080:8080"', 1))
    assert published(render(env_file, file=doctored)["services"]["airflow-apiserver"])[0][0] in ("", "0.0.0.0")


def test_health_restart_and_start_order(services):
    for name, service in services.items():
        if name in ONE_SHOT:
            assert str(service.get("restart", "no")) == "no", f"one-shot {name} must not restart"
            assert "healthcheck" not in service
        else:
            assert service["healthcheck"]["test"], f"{name} has no healthcheck"
            assert service["restart"] == "unless-stopped", f"{name} is not restarted when it dies"
        for target, condition in depends_on(service).items():
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}'s health, it has none"
            else:
                assert condition == "service_completed_successfully" and target in ONE_SHOT, (name, target, condition)
        assert service["logging"] == {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}, name
    scheduler = depends_on(services["airflow-scheduler"])
    assert {scheduler[s] for s in ("spark-connect", "spark-master", "airflow-apiserver")} == {"service_healthy"}
    assert scheduler["kafka-init"] == "service_completed_successfully"


# -- the DAGs' connections -------------------------------------------------------------------------
def _airflow_env(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SPARK_", "EOS_ETL_SPARK"))}
    env.update({
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        # Never opened: connections resolve from the environment first.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'unused.db'}",
        "PYTHONPATH": str(ROOT / "include"),
    })
    env.update(extra)
    return env


PARSE_CONNECTIONS = textwrap.dedent("""
    import json, sys
    from urllib.parse import urlsplit
    from airflow.models.connection import Connection
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from eos_etl.orchestration.settings import (KAFKA_CONN_ID, SPARK_CONN_ID, SPARK_CONNECT_CONN_ID,
                                                kafka_connection_from_airflow)

    kafka = Connection.get_connection_from_secrets(KAFKA_CONN_ID)
    spark = SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection
    url = SparkConnectHook(SPARK_CONNECT_CONN_ID).get_connection_url()
    channel = DefaultChannelBuilder(url)
    out = {
        "kafka": {"conn_type": kafka.conn_type, "host": kafka.host, "port": kafka.port, "login": kafka.login,
                  "password": kafka.password, "extra": kafka.extra_dejson},
        "client": kafka_connection_from_airflow(kafka).client_config(),
        "spark": {"master": spark["master"], "deploy_mode": spark["deploy_mode"], "binary": spark["spark_binary"]},
        "connect": {"endpoint": channel.endpoint, "token": channel.token, "use_ssl": channel.use_ssl,
                    "secure": channel.secure},
    }
    open(sys.argv[1], "w").write(json.dumps(out))
""")


def test_airflow_and_pyspark_parse_the_connections(services, dotenv, tmp_path):
    """Airflow's env backend and the providers' hooks read the JSON values; pyspark's own channel
    builder reads the Spark Connect URL the hook makes: a TLS channel (a token to a host other than
    `localhost`) carrying the token."""
    env = env_of(services["airflow-scheduler"])
    conns = {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}
    assert set(conns) == {"AIRFLOW_CONN_SPARK_DEFAULT", "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
                          "AIRFLOW_CONN_KAFKA_PURCHASES", "AIRFLOW_CONN_KAFKA_PURCHASES_WATCH"}
    result = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, "-c", PARSE_CONNECTIONS, str(result)], env=_airflow_env(tmp_path, conns),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(result.read_text())
    password = dotenv["EOS_ETL_KAFKA_PASSWORD"]
    assert out["kafka"] == {"conn_type": "generic", "host": "kafka", "port": 9093, "login": "etl",
                            "password": password, "extra": KAFKA_EXTRA}
    assert out["client"] == {"bootstrap.servers": "kafka:9093", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "etl", "sasl.password": password,
                             "ssl.ca.location": CA_FILE}
    assert out["spark"] == {"master": "spark://spark-master:7077", "deploy_mode": "client", "binary": "spark-submit"}
    assert out["connect"] == {"endpoint": "spark-connect:15002", "token": dotenv["SPARK_CONNECT_TOKEN"],
                              "use_ssl": True, "secure": True}
    # The windows run on that server by default; an empty EOS_ETL_SPARK_CONNECT_CONN_ID means spark-submit.
    assert env["EOS_ETL_SPARK_CONNECT_CONN_ID"] == "spark_connect_default"
    # The event-driven DAG's watcher: same login and CA, its own group (the `watcher` ACL role's).
    watch = json.loads(conns["AIRFLOW_CONN_KAFKA_PURCHASES_WATCH"])["extra"]
    assert (watch["group.id"], watch["sasl.password"], watch["ssl.ca.location"], watch["isolation.level"]) == (
        DEFAULT_GROUP + WATCH_GROUP_SUFFIX, password, CA_FILE, "read_committed")
    for name in AIRFLOW_SERVICES:
        assert {k: v for k, v in env_of(services[name]).items() if k.startswith("AIRFLOW_CONN_")} == conns, name


def test_the_spark_submit_route_is_one_setting_away(env_file, tmp_path):
    scheduler = render(env_file, {"EOS_ETL_SPARK_CONNECT_CONN_ID": ""})["services"]["airflow-scheduler"]
    assert env_of(scheduler)["EOS_ETL_SPARK_CONNECT_CONN_ID"] == ""
    from eos_etl.orchestration.settings import SPARK_CONNECT_ROUTE_ENV

    assert SPARK_CONNECT_ROUTE_ENV == "EOS_ETL_SPARK_CONNECT_CONN_ID"


def _heredoc_python(script: Path, marker: str) -> str:
    match = re.search(rf"python - <<'{marker}'\n(.*?)\n{marker}\n", script.read_text(), re.S)
    assert match, f"{script} has no python heredoc"
    return match.group(1)


def test_airflow_init_check_runs_with_the_compose_connections(services, dotenv, tmp_path):
    """The connection check airflow-init runs (docker/airflow/init.sh), executed as is."""
    env = env_of(services["airflow-init"])
    extra = {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_") or k == "EOS_ETL_SPARK_CONNECT_CONN_ID"}
    code = _heredoc_python(ROOT / "docker" / "airflow" / "init.sh", "PY")
    proc = subprocess.run([sys.executable, "-c", code], env=_airflow_env(tmp_path, extra), capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "master=spark://spark-master:7077 deploy-mode=client" in proc.stdout
    assert "KafkaConnection(kafka:9093, SASL_SSL, sasl=SCRAM-SHA-512:etl:***)" in proc.stdout
    assert "windows run on the Spark Connect server at spark-connect:15002, TLS on" in proc.stdout
    assert not any(dotenv[name] in proc.stdout + proc.stderr for name in SECRETS)


def test_api_server_script_writes_the_login(services, tmp_path):
    env = env_of(services["airflow-apiserver"])
    passwords = tmp_path / "passwords.json"
    run_env = {"PATH": os.environ["PATH"], "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"],
               "AIRFLOW_ADMIN_PASSWORD": env["AIRFLOW_ADMIN_PASSWORD"]}
    code = _heredoc_python(ROOT / "docker" / "airflow" / "api-server.sh", "EOF")
    proc = subprocess.run([sys.executable, "-c", code], env=run_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(passwords.read_text()) == {"admin": env["AIRFLOW_ADMIN_PASSWORD"]}
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600


# -- Spark -----------------------------------------------------------------------------------------
def test_spark_rpc_between_containers_is_authenticated_and_encrypted(services, dotenv):
    defaults = dict(line.split(None, 1) for line in (ROOT / "docker" / "spark" / "spark-defaults.conf").read_text()
                    .splitlines() if line.strip() and not line.startswith("#"))
    assert defaults == {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    # Every container that runs a Spark JVM talking to another container gets the one secret.
    given = {name for name, s in services.items() if "SPARK_AUTH_SECRET" in env_of(s)}
    assert given == {"airflow-scheduler", "spark-master", "spark-worker"}
    assert {env_of(services[n])["SPARK_AUTH_SECRET"] for n in given} == {dotenv["SPARK_AUTH_SECRET"]}
    for name in given:
        assert services[name]["image"] in ("eos-etl-airflow:local", "eos-etl-spark:local")
    entrypoints = [json.loads(value) for value in dockerfile_values("ENTRYPOINT")]
    assert entrypoints.count(["/usr/bin/tini", "--", "/opt/eos-etl/docker/spark/entrypoint.sh"]) == 2


def test_the_spark_entry_point_keeps_the_secret_off_command_lines_and_out_of_the_command(tmp_path):
    """docker/spark/entrypoint.sh as is: the secret lands in spark-defaults.conf (0600) next to the
    RPC settings, and the command it starts no longer has it in its environment."""
    conf_dir = tmp_path / "spark-conf"
    env = {"PATH": os.environ["PATH"], "SPARK_CONF_DIR": str(conf_dir), "SPARK_AUTH_SECRET": "s3cr3t-value-x"}
    proc = subprocess.run(["bash", str(ROOT / "docker" / "spark" / "entrypoint.sh"), "env"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "s3cr3t-value-x" not in proc.stdout and "SPARK_AUTH_SECRET" not in proc.stdout
    conf = conf_dir / "spark-defaults.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    lines = conf.read_text().splitlines()
    assert "spark.authenticate.secret          s3cr3t-value-x" in lines
    assert "spark.authenticate                 true" in lines and "spark.network.crypto.enabled       true" in lines
    assert [p.name for p in conf_dir.iterdir()] == ["spark-defaults.conf"]  # no draft left


def test_spark_cluster_and_the_drivers_address(services):
    master, worker = services["spark-master"], services["spark-worker"]
    cmd = master["command"]
    assert cmd[:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master"]
    opts = dict(zip(cmd[2::2], cmd[3::2], strict=True))
    master_url = f"spark://{opts['--host']}:{opts['--port']}"
    assert opts["--host"] == master["hostname"] == "spark-master"
    assert worker["command"][:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert worker["command"][-1] == master_url
    conn = json.loads(env_of(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert f"{conn['host']}:{conn['port']}" == master_url
    # Executors connect back to the drivers in the scheduler by its name.
    assert services["airflow-scheduler"]["hostname"] == "airflow-scheduler"
    for name in ("spark-master", "spark-worker", "spark-connect"):
        assert mounts(services[name])["/opt/eos-etl/include"] == (str(ROOT / "include"), True)
        assert mounts(services[name])["/opt/eos-etl/ca"] == ("ca", True)


def test_spark_connect_is_served_over_tls_in_front_of_a_loopback_server(services, dotenv):
    connect = services["spark-connect"]
    env = env_of(connect)
    assert connect["command"] == ["/usr/local/bin/eos-etl-spark-connect"] and connect["hostname"] == "spark-connect"
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == dotenv["SPARK_CONNECT_TOKEN"]
    assert env["EOS_ETL_SPARK_MASTER"] == "local[*,4]" and "SPARK_AUTH_SECRET" not in env
    haproxy = (ROOT / "docker" / "spark" / "haproxy-connect.cfg").read_text()
    (bind,) = re.findall(r"^\s*bind (.*)$", haproxy, re.M)
    (server,) = re.findall(r"^\s*server \S+ (\S+)$", haproxy, re.M)
    port, cert = re.fullmatch(r":(\d+) ssl crt (\S+) alpn h2", bind).groups()
    assert server == f"127.0.0.1:{env['EOS_ETL_SPARK_CONNECT_PORT']}"  # the server on the container's loopback
    assert json.loads(env_of(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])["port"] == int(port)
    assert mounts(connect)[str(Path(cert).parent)] == ("spark-connect-secrets", True)
    assert env_of(services["airflow-scheduler"])["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] == CA_FILE
    from eos_etl.embedded.spark_connect import SparkConnectServer

    assert SparkConnectServer(home=Path("/unused")).host == "127.0.0.1"  # where `spark-connect run` binds


# -- Kafka -----------------------------------------------------------------------------------------
def broker_properties() -> dict[str, str]:
    lines = (ROOT / "docker" / "kafka" / "server.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def listeners(value: str) -> dict[str, tuple[str, str]]:
    return {name: tuple(hostport.rsplit(":", 1)) for name, _, hostport in
            (item.partition("://") for item in value.split(","))}


def test_the_compose_broker_is_configured_as_the_embedded_one():
    from eos_etl.embedded.kafka_cluster import _BASE_PROPERTIES, replication_defaults

    props = broker_properties()
    embedded = {**_BASE_PROPERTIES, **replication_defaults(1), "inter.broker.listener.name": "INTERNAL"}
    assert {k: props.get(k) for k in embedded} == embedded
    bound, advertised = listeners(props["listeners"]), listeners(props["advertised.listeners"])
    assert bound == {"INTERNAL": ("127.0.0.1", "9092"), "SASL_SSL": ("", "9093"), "EXTERNAL": ("", "9094"),
                     "CONTROLLER": ("127.0.0.1", "9095")}
    assert advertised == {"INTERNAL": ("127.0.0.1", "9092"), "SASL_SSL": ("kafka", "9093"),
                          "EXTERNAL": ("localhost", "@KAFKA_EXTERNAL_PORT@")}
    assert props["listener.security.protocol.map"] == \
        "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,EXTERNAL:SASL_SSL"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9095"
    # SCRAM on both TLS listeners; no credential anywhere in the file.
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    for name in ("sasl_ssl", "external"):
        assert props[f"listener.name.{name}.scram-sha-512.sasl.jaas.config"] == \
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    assert not [k for k in props if "password" in k], "the broker's TLS key needs no password (PEM, 0400)"
    assert (props["ssl.keystore.type"], props["ssl.keystore.location"]) == ("PEM", "/etc/kafka/secrets/broker.pem")


def test_kafka_service_and_its_clients(services, dotenv):
    kafka, init = services["kafka"], services["kafka-init"]
    assert mounts(kafka)["/etc/kafka/secrets"] == ("kafka-secrets", True)
    assert init["network_mode"] == "service:kafka", "127.0.0.1 must be the broker's own loopback"
    assert depends_on(init) == {"kafka": "service_healthy"}
    assert env_of(init)["EOS_ETL_BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"  # INTERNAL: the super-user's
    assert (env_of(init)["EOS_ETL_PIPELINE_USER"], env_of(init)["EOS_ETL_PIPELINE_PASSWORD"]) == (
        "etl", dotenv["EOS_ETL_KAFKA_PASSWORD"])
    assert init["command"] == ["/usr/local/bin/eos-etl-kafka-init"] and init["image"] == "eos-etl-airflow:local"
    tls = services["tls-init"]
    assert tls["user"] == "0" and {t: s for t, (s, _) in mounts(tls).items()} == {
        "/etc/kafka/secrets": "kafka-secrets", "/etc/spark-connect/tls": "spark-connect-secrets",
        "/etc/eos-etl/ca": "ca"}
    assert env_of(tls)["KAFKA_TLS_HOSTS"] == "kafka,localhost"
    assert env_of(tls)["SPARK_CONNECT_TLS_HOSTS"].split(",")[0] == services["spark-connect"]["hostname"]
    args = dockerfile_args()
    assert (args["KAFKA_UID"], args["SPARK_UID"]) == (env_of(tls)["KAFKA_UID"], env_of(tls)["SPARK_UID"])


# -- the images' scripts ---------------------------------------------------------------------------
def test_shell_scripts_parse():
    scripts = sorted((ROOT / "docker").rglob("*.sh")) + sorted((ROOT / "scripts").glob("*.sh"))
    assert len(scripts) >= 8
    for script in scripts:
        assert script.read_text().startswith("#!/usr/bin/env bash\n"), script
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


# -- the base image ----------------------------------------------------------------------------------
FAKE_APT = """#!/bin/sh
# apt-get indextargets as Debian's apt prints it, for a machine with a local mirror and a third-party repo
[ "$1" = indextargets ] || exit 1
printf '%s\\n' \\
  'deb http://mirror.lan/debian/ bookworm main' 'deb http://mirror.lan/debian/ bookworm contrib' \\
  'deb http://mirror.lan/debian/ bookworm-updates main' \\
  'deb http://security.lan/debian-security/ bookworm-security main' \\
  'deb https://deb.nodesource.com/node_20.x/ nodistro main' 'deb-src http://mirror.lan/debian/ bookworm main' \\
  'deb http://mirror.lan/debian/ bookworm main'
"""


def test_the_base_image_comes_from_the_mirror_apt_is_configured_with(tmp_path):
    """scripts/make_debian_base.sh reads the mirror from apt's own configuration (`apt-get
    indextargets`), never a fixed host: its bookworm repositories, nothing else, become the image's."""
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text(FAKE_APT)
    fake.chmod(0o755)
    script = [str(ROOT / "scripts" / "make_debian_base.sh"), "--print-sources"]
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    env.pop("EOS_ETL_DEBIAN_MIRROR", None)
    proc = subprocess.run(script, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if not ln.startswith("#")]
    assert lines == ["mirror: http://mirror.lan/debian/", "deb http://mirror.lan/debian/ bookworm contrib main",
                     "deb http://mirror.lan/debian/ bookworm-updates main",
                     "deb http://security.lan/debian-security/ bookworm-security main"]
    chosen = subprocess.run(script, env={**env, "EOS_ETL_DEBIAN_MIRROR": "http://other.lan/debian"},
                            capture_output=True, text=True, timeout=30)
    assert chosen.stdout.splitlines()[0] == "mirror: http://other.lan/debian"
    fake.write_text("#!/bin/sh\necho 'deb http://archive.ubuntu.com/ubuntu/ noble main'\n")
    none = subprocess.run(script, env=env, capture_output=True, text=True, timeout=30)
    assert none.returncode == 1 and "no repository for Debian bookworm" in none.stderr
