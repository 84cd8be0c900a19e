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
#
# Durability as `create-topics` chooses it: replication factor min(3, brokers)
# and min.insync.replicas one less (at least 1). This stack runs one broker, so
# 1/1; point KAFKA_BOOTSTRAP_SERVERS at a real cluster and the defaults become 3/2
# (or set EOS_ETL_REPLICATION_FACTOR / EOS_ETL_MIN_INSYNC_REPLICAS).
set -euo pipefail

bootstrap=${KAFKA_BOOTSTRAP_SERVERS:-kafka:9092}
partitions=${EOS_ETL_PARTITIONS:-4}
topics_cmd=/opt/kafka/bin/kafka-topics.sh
brokers=$(/opt/kafka/bin/kafka-broker-api-versions.sh --bootstrap-server "$bootstrap" | grep -c '(id: [0-9]* rack')
replication_factor=${EOS_ETL_REPLICATION_FACTOR:-$(( brokers < 3 ? brokers : 3 ))}
min_isr=${EOS_ETL_MIN_INSYNC_REPLICAS:-$(( replication_factor > 1 ? replication_factor - 1 : 1 ))}
echo "topics-init: $brokers broker(s): replication factor $replication_factor, min.insync.replicas $min_isr"

create() {
  local topic=$1 count=$2
  shift 2
  "$topics_cmd" --bootstrap-server "$bootstrap" --create --if-not-exists \
    --topic "$topic" --partitions "$count" --replication-factor "$replication_factor" \
    --config "min.insync.replicas=$min_isr" "$@"
}

create purchases "$partitions"
create invoices "$partitions"
create shipments "$partitions"
create purchases.dlq 1 --config max.message.bytes=10485760

"$topics_cmd" --bootstrap-server "$bootstrap" --describe \
  --topic 'purchases|invoices|shipments|purchases\.dlq'
