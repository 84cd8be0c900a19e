"""SCRAM users: their salted credentials are stored by the brokers, set through the Admin API.

The password travels in the AlterUserScramCredentials request only: never in a
``server.properties``, a JAAS file or a command line (``kafka-configs.sh
--add-config`` would put it in argv). Setting a user needs Alter on the cluster:
the super-user's job (the loopback PLAINTEXT listener of the project's brokers).
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from .connection import KafkaConnection
from .errors import KafkaSetupError

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 8192


def set_scram_users(connection: KafkaConnection, users: dict[str, str], *, timeout_s: float = 60.0) -> None:
    """Create or update the SCRAM-SHA-512 credentials of ``users`` (name -> password).

    A quorum that has just formed may refuse the first requests: asked again until
    ``timeout_s``, then one :class:`KafkaSetupError` naming the users (never a password).
    """
    if not users:
        return
    admin = AdminClient({**connection.client_config(), "log_level": 0})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
    upserts = [UserScramCredentialUpsertion(user, info, password.encode()) for user, password in sorted(users.items())]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            for fut in admin.alter_user_scram_credentials(upserts, request_timeout=10).values():
                fut.result(timeout=15)
            return
        except Exception as exc:  # noqa: BLE001 - a fresh quorum may not take it yet; bounded by the deadline
            if time.monotonic() > deadline:
                raise KafkaSetupError(f"could not store the SCRAM credentials of {sorted(users)} within "
                                      f"{timeout_s:.0f}s: {exc}") from exc
            time.sleep(0.5)
