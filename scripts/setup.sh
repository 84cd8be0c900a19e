#!/usr/bin/env bash
# One-time (and idempotent) set-up: checks the machine, creates .venv,
# installs the pinned dependencies and fetches the Kafka/Spark jars.
# Re-running is cheap: each step is skipped when its inputs did not change.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "setup: $*" >&2; exit 1; }

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || fail "Python 3.11+ is required: apt-get install python3 python3-venv"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || fail "Python 3.11+ is required, found $("$PYTHON" --version 2>&1)"
command -v java >/dev/null || fail "Java 17+ is required for the Kafka broker and Spark: apt-get install openjdk-17-jre-headless"
java_major=$(java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}' | cut -d. -f1)
[ "${java_major:-0}" -ge 17 ] || fail "Java 17+ is required, found Java ${java_major:-unknown}: apt-get install openjdk-17-jre-headless"
command -v mvn >/dev/null || fail "Maven is required to fetch the Kafka and Spark jars from Maven Central: apt-get install maven"

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv || fail "could not create a virtual environment: apt-get install python3-venv"
fi

stamp=.venv/.eos-etl-requirements
want=$(cat requirements.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python dependencies (about a minute on a cold cache)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt
  .venv/bin/python -m pip install --quiet --no-deps -e .
  got=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')
  pinned=$(sed -n 's/^pyspark==//p' requirements.txt)
  [ "$got" = "$pinned" ] || fail "pyspark reports $got but $pinned is pinned (pyspark-client overwrote it?)"
  echo "$want" > "$stamp"
fi

.venv/bin/python -m eos_etl --log-level WARNING fetch-jars
# Spark's classes parsed and verified once per machine, not in every window's JVM (~30 s the first time).
.venv/bin/python -m eos_etl --log-level WARNING jvm-archive \
  || echo "setup: warning: no class-data archive; Spark's JVMs start without it (python -m eos_etl jvm-archive retries)"
# Debian's chromium for the real-browser UI test (installs it when root with apt).
bash scripts/install_browser.sh
# iptables for the network-partition lab (namespaces, cuts inside them): installed when root with apt.
if ! command -v iptables >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing iptables with apt-get (the network-partition lab's cuts)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null; }
fi
# Compose renders docker-compose.yaml for tests/unit/test_compose.py (`config`: no Docker engine needed).
if ! command -v docker-compose > /dev/null && ! docker compose version > /dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "setup: installing Debian's docker-compose (Compose v1) with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose > /dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose > /dev/null; } \
      || fail "could not install docker-compose: apt-get install --no-install-recommends docker-compose"
  else
    echo "setup: warning: Compose is missing; tests/unit/test_compose.py needs it: apt-get install --no-install-recommends docker-compose"
  fi
fi
