#!/usr/bin/env bash
# topics-init (one-shot, docker-compose.yaml): create the shop pipeline's
# topics on the compose broker; idempotent (--if-not-exists), so it runs on
# every `docker compose up`.
#
# Same layout as `python -m eos_etl create-topics`: purchases, invoices and
# shipments with the same partition count (a purchase's invoice and shipment
# land in the same-numbered partition, see the README's lineage contract),
# and one partition for the dead letters, which keep the original bytes and
# so get a larger max.message.bytes. Names are eos_etl.shop.schema.ShopTopics'
# defaults; a DAG Variable that renames topics needs them created here too.
set -euo pipefail

bootstrap=${KAFKA_BOOTSTRAP_SERVERS:-kafka:9092}
partitions=${EOS_ETL_PARTITIONS:-4}
topics_cmd=/opt/kafka/bin/kafka-topics.sh

create() {
  local topic=$1 count=$2
  shift 2
  "$topics_cmd" --bootstrap-server "$bootstrap" --create --if-not-exists \
    --topic "$topic" --partitions "$count" --replication-factor 1 "$@"
}

create purchases "$partitions"
create invoices "$partitions"
create shipments "$partitions"
create purchases.dlq 1 --config max.message.bytes=10485760

"$topics_cmd" --bootstrap-server "$bootstrap" --describe \
  --topic 'purchases|invoices|shipments|purchases\.dlq'
