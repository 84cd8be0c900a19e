# The two commands a newcomer needs:  make demo   and   make test
PY := .venv/bin/python
# pytest-xdist workers for `make test`: CI has 2 cores, and a third worker runs while the others' tests
# wait on schedules, retention and backfills (each worker starts its own broker and Spark session)
TEST_WORKERS ?= 3

.PHONY: setup lint demo test test-fast test-unit soak soak-cluster soak-partitions soak-model soak-connect-kills bench bench-peers bench-breakdown bench-partitions up down status lock clean cluster-up cluster-down cluster-status demo-cluster compose-env compose-check

setup:
	@bash scripts/setup.sh

## Bring the stack up on the embedded defaults and run the pipeline end to end.
demo: setup
	$(PY) -m eos_etl demo

## The style the code keeps (ruff, configured in pyproject.toml): seconds, so `make test` runs it first.
lint: setup
	$(PY) -m ruff check .

## The whole test suite against a real Kafka broker, Spark and Airflow (after the linter).
test: setup lint
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 -n $(TEST_WORKERS) --dist loadgroup

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

## The tests that need no broker, cluster or Spark (about 2 minutes): tests/unit (docs/testing.md, "Where the tests live").
test-unit: setup
	$(PY) -m pytest -q -p no:cacheprovider --durations=10 -n $(TEST_WORKERS) tests/unit

## Fault-injection soak at full counts (~30-40 min); writes docs/reliability.md.
soak: setup
	$(PY) -m eos_etl_lab soak

## Broker and Spark faults on a private three-node Kafka cluster + Spark standalone, then the network
## partitions (soak-partitions); writes the cluster and partition sections of docs/reliability.md.
soak-cluster: setup
	status=0; $(PY) -m eos_etl_lab soak --cluster || status=1; $(PY) -m eos_etl_lab soak --partitions || status=1; exit $$status

## Network partitions (root): brokers and the job in network namespaces of their own, cut apart with iptables,
## on clusters formatted with transaction.version 1 and 2 (~2 h with 3 seeds); writes the partition section.
soak-partitions: setup
	$(PY) -m eos_etl_lab soak --partitions

## Randomized operation soak (Jepsen-style): seeded histories of produces, runs on the local and the Connect route,
## crashes, signals, concurrent runs, plan-window, replays, offsets restore, partitions added, input re-created,
## input records deleted, group deleted, offsets expired, broker restarts/pauses, Connect server kills; checked after
## every step, failing histories shrunk; writes the model section of docs/reliability.md.
## MODEL_SEEDS=20 MODEL_LENGTH=10 by default (about an hour).
MODEL_SEEDS ?= 20
MODEL_LENGTH ?= 10
soak-model: setup
	$(PY) -m eos_etl_lab soak --model --connect --seeds $(MODEL_SEEDS) --length $(MODEL_LENGTH)

## Client SIGKILLs mid-window on one Spark Connect server (CLIENT_KILLS=300 by default, about 35 s each, 3 h): the
## server must outlive them all, every shop exact; writes its section of docs/reliability.md.
CLIENT_KILLS ?= 300
soak-connect-kills: setup
	$(PY) -m eos_etl_lab soak --scenarios connect_client_kills --client-kills $(CLIENT_KILLS)

## Benchmarks (~60 min, not part of the tests): writes docs/benchmarks.md and docs/benchmarks.png, then the
## peers side by side (bench-peers).
bench: setup
	$(PY) -m eos_etl_lab bench
	$(PY) -m eos_etl_lab bench --only peers --records 1000000

## The default route beside what a user would pick instead (Spark's Kafka writer, quixstreams exactly-once) at
## 1,000,000 purchases, three times each, each judged by the checker (~20 min); writes docs/peers.md and .json.
bench-peers: setup
	$(PY) -m eos_etl_lab bench --only peers --records 1000000

## Where a purchase's time goes on the default route (~6 min): read, transform, Arrow, decode, publish
## side by side at 1,000,000 purchases; writes docs/breakdown.json, prints its tables.
bench-breakdown: setup
	$(PY) -m eos_etl_lab bench --only breakdown

## A window's cost against the input's partition count (4 to 1,024) on the default route: full, small and
## empty windows, the checker on each count; writes docs/partitions.json, prints its table.
bench-partitions: setup
	$(PY) -m eos_etl_lab bench --only partitions

up: setup
	$(PY) -m eos_etl up

down:
	-$(PY) -m eos_etl down

status:
	$(PY) -m eos_etl status

## The local clusters: 3 Kafka nodes (var/kafka-cluster) + Spark standalone master and 2 workers (var/spark-cluster).
cluster-up: setup
	$(PY) -m eos_etl cluster up

cluster-down:
	-$(PY) -m eos_etl cluster down

cluster-status:
	$(PY) -m eos_etl cluster status

## The demo on the clusters: Airflow -> spark-submit to the standalone master -> 3-broker Kafka -> GE -> report.
demo-cluster: setup
	$(PY) -m eos_etl demo --cluster

## .env for docker-compose.yaml with random secrets (0600; adds missing ones, never overwrites).
compose-env:
	python3 scripts/compose_env.py

## docker-compose.yaml for real (root, ~15 min cold): builds every image, runs the pipeline in the containers, down -v.
compose-check: setup
	$(PY) scripts/compose_check.py

## Re-resolve and pin every transitive dependency (after changing requirements.txt).
lock:
	rm -rf .venv-lock && python3 -m venv .venv-lock
	.venv-lock/bin/pip install --quiet $$(grep -v -e '^-c' -e '^#' -e '^$$' requirements.txt)
	.venv-lock/bin/pip freeze --exclude-editable | grep -v -E '^(pip|setuptools|wheel)==' > constraints.txt
	rm -rf .venv-lock

clean: down
	rm -rf var .cache .venv
