#!/usr/bin/env bash
# spark-connect (docker-compose.yaml): Spark's Connect server, reached over TLS.
#
# Spark's Connect server speaks plaintext gRPC only. pyspark's client sends its token over TLS to
# every host but `localhost` (pyspark.sql.connect.client.core.DefaultChannelBuilder.toChannel: a
# token or use_ssl=true means grpc.ssl_channel_credentials(), except for the host `localhost`, which
# gets gRPC's local credentials), so `sc://spark-connect:15002/;token=...` needs a TLS server.
# The server therefore listens on this container's loopback only ($EOS_ETL_SPARK_CONNECT_PORT,
# unreachable from the network) and haproxy terminates TLS on :15002 (ALPN h2, as gRPC requires)
# with the certificate tls-init made for `spark-connect`, passing the stream through unchanged.
# Clients verify that certificate against the stack's CA ($GRPC_DEFAULT_SSL_ROOTS_FILE_PATH) and send
# the token inside TLS; the server checks it. Authentication stays the server's own token; TLS adds
# the server's identity and keeps the token (and the data) off the network in clear.
#
# Two processes, one container: when either ends, the container ends (wait -n) and Docker's restart
# policy starts both again. SIGTERM (docker stop) is passed on to both.
set -euo pipefail

haproxy -db -f /etc/haproxy/spark-connect.cfg &
proxy=$!
python -m eos_etl spark-connect run &
server=$!
stopping=""
trap 'stopping=1; kill -TERM "$proxy" "$server" 2> /dev/null || true' TERM INT

status=0
wait -n -p ended "$proxy" "$server" || status=$?
if [[ -z $stopping ]]; then
  [[ ${ended:-} == "$proxy" ]] && what=haproxy || what="the Spark Connect server"
  echo "spark-connect: $what ended (status $status): the container ends, its restart policy starts it again" >&2
fi
kill -TERM "$proxy" "$server" 2> /dev/null || true
wait "$proxy" "$server" 2> /dev/null || true
exit "$status"
