"""Savepoints inside real transactions for the embedded Airflow's SQLite database (its ``airflow_local_settings``).

pysqlite's legacy transaction control (Python's default before 3.16) emits no
``BEGIN`` before a ``SAVEPOINT``: a savepoint opened right after a commit is the
outermost transaction, and its ``RELEASE`` commits. Airflow 3.3.2 creates a
backfill's runs each in a savepoint and, when SQLite's lock then refuses a later
statement, "rolls back" and deletes the runs tagged with the backfill: the
savepoints had committed, so the rollback undoes nothing, and the delete takes
the existing runs the backfill had cleared and re-tagged with it. The scheduler
that held one of them dies on its next flush (``StaleDataError``,
``ObjectDeletedError``), and tasks of deleted runs fail with "Task Instance not
found" (docs/airflow-supervision.md).

The fix here is the narrowest one that removes that: a savepoint opened outside
a transaction first opens one (``BEGIN``). Its released savepoints then stay
inside it, and a refused backfill rolls back whole. Nothing else changes:
SQLAlchemy's full recipe ("Serializable isolation / Savepoints / Transactional
DDL" in its SQLite dialect) would give every read a snapshot held to its
commit, and Airflow reads in long sessions that expect to see others' commits
(its own ``initdb`` then fails: "no such table: slot_pool").

Airflow calls :func:`create_metadata_engine` instead of its own when the home's
``config/airflow_local_settings.py`` exports it (``settings.import_local_settings``);
the embedded stack writes that file. Other databases are untouched. The async
engine (the API server's reads) keeps Airflow's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

__all__ = ["create_metadata_engine"]

# What the embedded stack writes to $AIRFLOW_HOME/config/airflow_local_settings.py.
LOCAL_SETTINGS = (
    "# Written by eos_etl on every start: savepoints inside real SQLite transactions\n"
    "# (eos_etl.embedded.airflow_sqlite).\n"
    "from eos_etl.embedded.airflow_sqlite import create_metadata_engine  # noqa: F401\n"
    "\n__all__ = [\"create_metadata_engine\"]\n"
)


def savepoints_in_transactions(engine: Engine) -> Engine:
    """Make a savepoint of ``engine`` (a SQLite one; others are returned as they are) never the outermost
    transaction."""
    if engine.dialect.name != "sqlite":
        return engine

    @event.listens_for(engine, "savepoint")
    def _begin_first(connection, _name) -> None:
        dbapi_connection = connection.connection.dbapi_connection
        if not dbapi_connection.in_transaction:
            dbapi_connection.execute("BEGIN")  # pysqlite then commits or rolls it back as its own

    return engine


def create_metadata_engine(sql_alchemy_conn: str, *, engine_args: dict[str, Any],
                           connect_args: dict[str, Any]) -> Engine:
    return savepoints_in_transactions(
        create_engine(sql_alchemy_conn, connect_args=connect_args, **engine_args, future=True))
