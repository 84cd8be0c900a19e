"""Write `.env` for docker-compose.yaml with a fresh random value for every secret (stdlib only).

Every secret in the compose file is `${VAR:?}` (no default anywhere); this is
the quick way to set them all. The file is created 0600 and never overwritten:
delete it first to start over (a new POSTGRES_PASSWORD or AIRFLOW_FERNET_KEY
does not fit data already in the volumes). `.env` is git-ignored.
Values are URL-safe (POSTGRES_PASSWORD goes into a URL, EOS_ETL_KAFKA_PASSWORD
into a JSON string).
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
from pathlib import Path

#: The secrets docker-compose.yaml requires; tests/test_compose.py checks this list against it.
SECRETS = {
    "POSTGRES_PASSWORD": lambda: secrets.token_urlsafe(24),
    "AIRFLOW_ADMIN_PASSWORD": lambda: secrets.token_urlsafe(18),
    # Fernet: 32 random bytes, URL-safe base64 (what cryptography's Fernet.generate_key makes).
    "AIRFLOW_FERNET_KEY": lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
    "AIRFLOW_JWT_SECRET": lambda: secrets.token_urlsafe(48),
    "AIRFLOW_API_SECRET_KEY": lambda: secrets.token_urlsafe(32),
    "EOS_ETL_KAFKA_PASSWORD": lambda: secrets.token_urlsafe(24),
}


def render() -> str:
    lines = ["# docker-compose.yaml secrets, made by scripts/compose_env.py. Keep private (0600, git-ignored)."]
    lines += [f"{name}={make()}" for name, make in SECRETS.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / ".env"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"compose-env: {path} exists; kept as it is (delete it to make new secrets)", file=sys.stderr)
        return 0
    with os.fdopen(fd, "w") as f:
        f.write(render())
    print(f"compose-env: wrote {len(SECRETS)} random secrets to {path} (mode 0600); "
          f"the Airflow login is admin / AIRFLOW_ADMIN_PASSWORD from that file", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
