#!/usr/bin/env bash
# postgres (docker-compose.yaml): Airflow's metadata database, Debian's PostgreSQL.
#
# On an empty data volume, first: a cluster whose superuser is `postgres` with no password at all
# (it logs in only over this container's Unix socket, as the OS user postgres: peer), and a login
# role $POSTGRES_USER, no superuser, owning the database $POSTGRES_DB, with $POSTGRES_PASSWORD.
# The password reaches PostgreSQL on single-user mode's standard input, never on a command line,
# and is stored as a SCRAM-SHA-256 verifier. Every network login needs a password (scram-sha-256).
# The variable is removed from the server's environment.
set -euo pipefail

: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}"
user=${POSTGRES_USER:-airflow}
db=${POSTGRES_DB:-airflow}
[[ $user =~ ^[a-z_][a-z0-9_]*$ && $db =~ ^[a-z_][a-z0-9_]*$ ]] \
  || { echo "error: POSTGRES_USER and POSTGRES_DB must be lower-case identifiers" >&2; exit 2; }

if [[ ! -s $PGDATA/PG_VERSION ]]; then
  initdb --username=postgres --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 \
    > /dev/null
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  quoted=${POSTGRES_PASSWORD//\'/\'\'}
  postgres --single -D "$PGDATA" postgres > /dev/null <<SQL
CREATE ROLE "$user" LOGIN PASSWORD '$quoted';
CREATE DATABASE "$db" OWNER "$user";
SQL
  unset quoted
  echo "postgres: new cluster in $PGDATA, database $db owned by $user"
fi
unset POSTGRES_PASSWORD
exec postgres -D "$PGDATA" -c listen_addresses='*'
