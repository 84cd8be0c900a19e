#!/usr/bin/env bash
# kafka-tls-init (one-shot, docker-compose.yaml): a local CA and the broker's
# TLS certificate, made with keytool from the Kafka image's own JRE (nothing
# downloaded). Idempotent: an existing keystore is kept until it is older than
# KAFKA_TLS_RENEW_DAYS; then everything, the CA included, is made anew.
#
#   $KAFKA_SECRETS_DIR (the broker's only; the apache/kafka image reads it)
#     broker.p12      PKCS12: the broker's key and certificate chain
#     keystore_creds  its password (random, made here; never in the environment)
#     key_creds       the same password (the image wants both files)
#   $KAFKA_CA_DIR (public; mounted read-only by every Kafka client)
#     ca.pem          the CA certificate clients verify the broker against
#
# The CA's private key lives in a temporary directory only and is gone when
# this script ends: nobody can sign another certificate this CA vouches for.
# Passwords reach keytool through -storepass:file, never on its command line.
set -euo pipefail

secrets=${KAFKA_SECRETS_DIR:-/etc/kafka/secrets}
ca_dir=${KAFKA_CA_DIR:-/etc/kafka/ca}
hosts=${KAFKA_TLS_HOSTS:-kafka,localhost}
days=${KAFKA_TLS_DAYS:-825}
renew_days=${KAFKA_TLS_RENEW_DAYS:-730}
owner=${KAFKA_SECRETS_OWNER:-appuser}

keystore=$secrets/broker.p12
if [[ -s $keystore && -s $secrets/keystore_creds && -s $secrets/key_creds && -s $ca_dir/ca.pem ]] \
   && [[ -z $(find "$keystore" -mtime +"$renew_days") ]]; then
  echo "kafka-tls-init: keeping the broker certificate in $keystore"
  exit 0
fi

umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 32 random bytes, base64 without characters a properties file or a shell could mangle.
head -c 32 /dev/urandom | base64 | tr -d '/+=\n' > "$work/pass"

san=""
IFS=',' read -r -a names <<< "$hosts"
for name in "${names[@]}"; do
  if [[ $name =~ ^[0-9.]+$ ]]; then san+="ip:$name,"; else san+="dns:$name,"; fi
done
san=${san%,}

store() { echo -keystore "$1" -storetype PKCS12 -storepass:file "$work/pass"; }

# The CA: signs the broker certificate, then its key is dropped with $work.
keytool -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity "$days" \
  -dname "CN=eos-etl compose CA, O=eos-etl" -ext bc:c=ca:true,pathlen:0 -ext ku:c=keyCertSign,cRLSign \
  $(store "$work/ca.p12")
keytool -exportcert -rfc -alias ca $(store "$work/ca.p12") -file "$work/ca.pem"

# The broker: a key pair, a request, the CA's signature for the names clients dial.
keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity "$days" \
  -dname "CN=${names[0]}, O=eos-etl" $(store "$work/broker.p12")
keytool -certreq -alias broker $(store "$work/broker.p12") -file "$work/broker.csr"
keytool -gencert -alias ca $(store "$work/ca.p12") -infile "$work/broker.csr" -outfile "$work/broker.crt" \
  -rfc -validity "$days" -ext "san=$san" -ext ku:c=digitalSignature,keyEncipherment -ext eku=serverAuth
keytool -importcert -noprompt -alias ca -file "$work/ca.pem" $(store "$work/broker.p12")
keytool -importcert -noprompt -alias broker -file "$work/broker.crt" $(store "$work/broker.p12")

mkdir -p "$secrets" "$ca_dir"
chmod 0755 "$ca_dir"
install -m 0400 "$work/broker.p12" "$keystore"
install -m 0400 "$work/pass" "$secrets/keystore_creds"
install -m 0400 "$work/pass" "$secrets/key_creds"
install -m 0444 "$work/ca.pem" "$ca_dir/ca.pem"
if [[ $(id -u) == 0 ]] && id "$owner" > /dev/null 2>&1; then
  chown "$owner" "$keystore" "$secrets/keystore_creds" "$secrets/key_creds"
fi
echo "kafka-tls-init: new CA and broker certificate for $san (valid $days days) in $keystore, CA in $ca_dir/ca.pem"
