#!/usr/bin/env bash
# tls-init (one-shot, docker-compose.yaml): the stack's own CA and the certificates of its two
# TLS servers, made with openssl (nothing downloaded). Idempotent: existing certificates are kept
# until they are older than TLS_RENEW_DAYS; then everything, the CA included, is made anew.
#
#   $KAFKA_SECRETS_DIR/broker.pem          the broker's key, certificate and the CA (Kafka's PEM
#                                           keystore, as the embedded broker's); 0400, the kafka user's
#   $SPARK_CONNECT_SECRETS_DIR/server.pem  the Spark Connect TLS endpoint's key and certificate
#                                           (haproxy); 0400, the spark user's
#   $CA_DIR/ca.pem                          the CA certificate every client verifies them against
#                                           (public; mounted read-only by the clients)
#
# Keys are unencrypted PKCS#8 in files only their server's user can read: no keystore password
# exists, so none has to be stored or passed. The CA's private key lives in a temporary directory
# only and is gone when this script ends: nobody can sign another certificate this CA vouches for.
# Run as root (the volumes are root's when new); the files go to the servers' users by uid.
set -euo pipefail

kafka_dir=${KAFKA_SECRETS_DIR:-/etc/kafka/secrets}
connect_dir=${SPARK_CONNECT_SECRETS_DIR:-/etc/spark-connect/tls}
ca_dir=${CA_DIR:-/etc/eos-etl/ca}
kafka_hosts=${KAFKA_TLS_HOSTS:-kafka,localhost}
connect_hosts=${SPARK_CONNECT_TLS_HOSTS:-spark-connect,localhost}
kafka_uid=${KAFKA_UID:-1000}
spark_uid=${SPARK_UID:-185}
days=${TLS_DAYS:-825}
renew_days=${TLS_RENEW_DAYS:-730}

outputs=("$kafka_dir/broker.pem" "$connect_dir/server.pem" "$ca_dir/ca.pem")
fresh=1
for f in "${outputs[@]}"; do
  if [[ ! -s $f || -n $(find "$f" -mtime +"$renew_days") ]]; then fresh=0; fi
done
if ((fresh)); then
  echo "tls-init: keeping the certificates in $kafka_dir, $connect_dir and $ca_dir/ca.pem"
  exit 0
fi

umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

san() {  # "a,b,10.0.0.1" -> "DNS:a,DNS:b,IP:10.0.0.1"
  local out="" name
  IFS=',' read -r -a names <<< "$1"
  for name in "${names[@]}"; do
    if [[ $name =~ ^[0-9.]+$ ]]; then out+="IP:$name,"; else out+="DNS:$name,"; fi
  done
  echo "${out%,}"
}

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" -days "$days" \
  -subj "/O=eos-etl/CN=eos-etl compose CA" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null

issue() {  # name hosts -> $work/name.pem: key, certificate, CA
  local name=$1 hosts=$2
  openssl req -newkey rsa:2048 -nodes -keyout "$work/$name.key" -out "$work/$name.csr" \
    -subj "/O=eos-etl/CN=${hosts%%,*}" 2> /dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=$(san "$hosts")" > "$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$days" -extfile "$work/$name.ext" -out "$work/$name.crt" 2> /dev/null
  cat "$work/$name.key" "$work/$name.crt" "$work/ca.pem" > "$work/$name.pem"
}
issue broker "$kafka_hosts"
issue connect "$connect_hosts"

mkdir -p "$kafka_dir" "$connect_dir" "$ca_dir"
chmod 0755 "$ca_dir"
install -m 0400 "$work/broker.pem" "$kafka_dir/broker.pem"
install -m 0400 "$work/connect.pem" "$connect_dir/server.pem"
install -m 0444 "$work/ca.pem" "$ca_dir/ca.pem"
if [[ $(id -u) == 0 ]]; then
  chown "$kafka_uid" "$kafka_dir" "$kafka_dir/broker.pem"
  chown "$spark_uid" "$connect_dir" "$connect_dir/server.pem"
fi
echo "tls-init: new CA ($ca_dir/ca.pem), broker certificate for $(san "$kafka_hosts"), Spark Connect certificate for $(san "$connect_hosts") (valid $days days)"
