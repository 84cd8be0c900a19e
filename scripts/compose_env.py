"""Write `.env` for docker-compose.yaml with a fresh random value for every secret (stdlib only).

Every secret in the compose file is `${VAR:?}` (no default anywhere); this is the quick way to
set them all. A new file is created 0600. An existing one is never rewritten: secrets it lacks
(added to the stack since it was made) are appended with fresh values, the others stay as they
are (a new POSTGRES_PASSWORD or AIRFLOW_FERNET_KEY would not fit data already in the volumes).
`.env` is git-ignored. Values are URL-safe (POSTGRES_PASSWORD goes into a URL,
EOS_ETL_KAFKA_PASSWORD and SPARK_CONNECT_TOKEN into JSON strings).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import stat
import sys
from pathlib import Path

#: The secrets docker-compose.yaml requires; tests/unit/test_compose.py checks this list against it.
SECRETS = {
    "POSTGRES_PASSWORD": lambda: secrets.token_urlsafe(24),
    "AIRFLOW_ADMIN_PASSWORD": lambda: secrets.token_urlsafe(18),
    # Fernet: 32 random bytes, URL-safe base64 (what cryptography's Fernet.generate_key makes).
    "AIRFLOW_FERNET_KEY": lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
    "AIRFLOW_JWT_SECRET": lambda: secrets.token_urlsafe(48),
    "AIRFLOW_API_SECRET_KEY": lambda: secrets.token_urlsafe(32),
    "EOS_ETL_KAFKA_PASSWORD": lambda: secrets.token_urlsafe(24),
    "SPARK_AUTH_SECRET": lambda: secrets.token_urlsafe(32),
    "SPARK_CONNECT_TOKEN": lambda: secrets.token_urlsafe(32),
}
#: Settings that are no secret, written with the secrets. Compose v1 knows no top-level `name:`
#: in the file, so the project's name (volumes, network, containers) comes from here.
SETTINGS = {"COMPOSE_PROJECT_NAME": "eos-etl"}
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def render(names=(*SETTINGS, *SECRETS)) -> str:
    lines = ["# docker-compose.yaml secrets, made by scripts/compose_env.py. Keep private (0600, git-ignored)."]
    lines += [f"{name}={SETTINGS[name] if name in SETTINGS else SECRETS[name]()}" for name in names]
    return "\n".join(lines) + "\n"


def assigned(text: str) -> set[str]:
    """The names a `.env` gives a non-empty value (as Compose reads it: `NAME=value` lines)."""
    found = set()
    for line in text.splitlines():
        m = _ASSIGNMENT.match(line)
        if m and not line.lstrip().startswith("#") and m.group(2).strip().strip("'\""):
            found.add(m.group(1))
    return found


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / ".env"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text()
        missing = [name for name in (*SETTINGS, *SECRETS) if name not in assigned(text)]
        if not missing:
            print(f"compose-env: {path} has every secret; kept as it is (delete it to make new ones)",
                  file=sys.stderr)
            return 0
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            print(f"compose-env: warning: {path} is readable by others; chmod 600 it", file=sys.stderr)
        with open(path, "a") as f:
            f.write(("" if text.endswith("\n") or not text else "\n") + render(missing))
        print(f"compose-env: added {', '.join(missing)} to {path}; its other secrets are kept", file=sys.stderr)
        return 0
    with os.fdopen(fd, "w") as f:
        f.write(render())
    print(f"compose-env: wrote {len(SECRETS)} random secrets to {path} (mode 0600); "
          f"the Airflow login is admin / AIRFLOW_ADMIN_PASSWORD from that file", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
