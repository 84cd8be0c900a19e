#!/usr/bin/env bash
# airflow-apiserver (docker-compose.yaml): start `airflow api-server` with a
# known login.
#
# The Simple auth manager reads the passwords of the users declared in
# [core] simple_auth_manager_users from a JSON file and, for any user missing
# there, generates a random password and prints it. We write the file from
# $AIRFLOW_ADMIN_PASSWORD first (the user name is the first entry of
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS), so the login is predictable.
# Airflow opens the file read-write, so it cannot be a read-only mount.
set -euo pipefail

python - <<'EOF'
import json
import os

path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
users = os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin")
user = users.split(",")[0].split(":")[0].strip()
password = os.environ.get("AIRFLOW_ADMIN_PASSWORD")
if not password:
    raise SystemExit("AIRFLOW_ADMIN_PASSWORD is not set")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({user: password}, f)
    f.write("\n")
os.chmod(path, 0o600)
print(f"Simple auth manager: login '{user}' written to {path}")
EOF

exec airflow api-server "$@"
