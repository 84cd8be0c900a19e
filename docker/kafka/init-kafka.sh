#!/usr/bin/env bash
# kafka-init (one-shot, docker-compose.yaml; the airflow image): run in the broker's network
# namespace, as the super-user (the loopback PLAINTEXT listener
# 127.0.0.1:9092, principal ANONYMOUS); idempotent, so it runs on every
# `docker compose up`.
#
# 1. The pipeline's SCRAM user: its password comes from the environment
#    (EOS_ETL_PIPELINE_PASSWORD, from .env), travels in the Admin API request
#    only, never on a command line.
# 2. The shop's topics, as `eos-etl create-topics` makes them: purchases,
#    invoices and shipments with the same partition count, one partition for
#    the dead letters; replication factor min(3, brokers), min.insync.replicas
#    one less (or EOS_ETL_REPLICATION_FACTOR / EOS_ETL_MIN_INSYNC_REPLICAS).
#    A DAG Variable that renames topics needs them created here too.
# 3. The pipeline user's ACLs, exactly the roles `pipeline` (plan and run
#    windows), `validator` (the DAG's validate task uses the same login) and
#    `watcher` (the event-driven DAG's arrivals consumer, group
#    `<group>-arrivals`, connection kafka_purchases_watch).
set -euo pipefail

user=${EOS_ETL_PIPELINE_USER:?EOS_ETL_PIPELINE_USER is not set}

eos-etl scram-user --username "$user" --password-env EOS_ETL_PIPELINE_PASSWORD

topic_args=(--partitions "${EOS_ETL_PARTITIONS:-4}")
if [[ -n ${EOS_ETL_REPLICATION_FACTOR:-} ]]; then
  topic_args+=(--replication-factor "$EOS_ETL_REPLICATION_FACTOR")
fi
if [[ -n ${EOS_ETL_MIN_INSYNC_REPLICAS:-} ]]; then
  topic_args+=(--min-insync-replicas "$EOS_ETL_MIN_INSYNC_REPLICAS")
fi
eos-etl create-topics "${topic_args[@]}"

eos-etl acl grant --principal "$user" --role pipeline --role validator --role watcher
