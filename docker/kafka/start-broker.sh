#!/usr/bin/env bash
# kafka (docker-compose.yaml): one KRaft node from the Maven Central jars the embedded broker runs
# (include/eos_etl/jars/versions.py KAFKA_BROKER, in /opt/kafka/libs), with the same JVM settings
# (include/eos_etl/embedded/kafka_cluster.py KafkaCluster.jvm_args). The first start on an empty data
# volume formats its KRaft storage with a new cluster id; later starts reuse it.
set -euo pipefail

port=${KAFKA_EXTERNAL_PORT:-9094}
[[ $port =~ ^[0-9]{1,5}$ ]] || { echo "error: KAFKA_EXTERNAL_PORT must be a port number, not '$port'" >&2; exit 2; }
config=/var/lib/kafka/server.properties
data=/var/lib/kafka/data
sed -e "s/@KAFKA_EXTERNAL_PORT@/$port/" /etc/kafka/server.properties > "$config"

java=(java "-Xmx${KAFKA_HEAP:-768m}" -Xms128m -XX:+UseG1GC -Djava.awt.headless=true
      -Dlog4j2.configurationFile=/etc/kafka/log4j2.properties -cp '/opt/kafka/libs/*')
if [[ ! -s $data/meta.properties ]]; then
  cluster_id=$("${java[@]}" kafka.tools.StorageTool random-uuid | tail -1)
  "${java[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$config"
fi
exec "${java[@]}" kafka.Kafka "$config"
