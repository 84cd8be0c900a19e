"""Naming the process that holds the embedded Airflow's SQLite lock (embedded/sqlite_locks.py), and the REST
client's error when Airflow leaves a call unanswered: real SQLite, a real holder process, no Airflow."""

from __future__ import annotations

import http.server
import inspect
import socket
import sqlite3
import subprocess
import sys
import threading

import pytest

from eos_etl.embedded.airflow import SQLITE_BUSY_TIMEOUT_S
from eos_etl.embedded.airflow_rest import CALL_TIMEOUT_S, AirflowRestClient
from eos_etl.embedded.errors import AirflowUnansweredError
from eos_etl.embedded.sqlite_locks import lock_holders

HOLDER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("begin immediate")  # the write lock, until this process ends
c.execute("insert into t values (1)")
print("holding", flush=True)
time.sleep(60)
"""


@pytest.fixture
def wal_db(tmp_path):
    db = tmp_path / "airflow.db"
    c = sqlite3.connect(db)
    c.execute("pragma journal_mode=wal")
    c.execute("create table t (x)")
    c.commit()
    yield db
    c.close()


@pytest.fixture
def holder(wal_db):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(wal_db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "holding"
    yield proc
    proc.kill()
    proc.wait()


def test_the_process_holding_the_write_lock_is_named(wal_db, holder):
    [held] = lock_holders(wal_db)
    assert held.startswith(f"write lock: pid {holder.pid} ({sys.executable} -c"), held
    writer = sqlite3.connect(wal_db, timeout=0.2, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        writer.execute("begin immediate")  # what Airflow's components meet meanwhile
    holder.kill()
    holder.wait()
    assert lock_holders(wal_db) == []
    writer.execute("begin immediate")
    writer.close()


def test_a_reader_holds_nothing_a_writer_waits_for(wal_db):
    reader = sqlite3.connect(wal_db, isolation_level=None)
    reader.execute("begin")
    reader.execute("select * from t").fetchall()  # a WAL reader's mark, not a lock on writers
    assert lock_holders(wal_db) == []
    reader.close()


def test_an_unanswered_call_names_the_lock_holder(wal_db, holder):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        client = AirflowRestClient(f"http://127.0.0.1:{silent.getsockname()[1]}", "admin", "pw", db_file=wal_db)
        locked = rf"within 1s; its SQLite database is locked: write lock: pid {holder.pid} "
        with pytest.raises(AirflowUnansweredError, match=locked):
            client.call("PATCH", "/api/v2/dags/d", {"is_paused": True}, "token", timeout=1.0)
    finally:
        silent.close()


class _Locked(http.server.BaseHTTPRequestHandler):
    """Answers every request as Airflow's API does while SQLite refuses its write: 500."""

    def do_PATCH(self):  # noqa: N802 (http.server's name)
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"detail": "(sqlite3.OperationalError) database is locked"}')

    def log_message(self, *args):
        pass


def test_a_call_refused_by_the_lock_until_its_timeout_names_the_holder(wal_db, holder):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Locked)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = AirflowRestClient(f"http://127.0.0.1:{server.server_address[1]}", "admin", "pw", db_file=wal_db)
        locked = (r"refused PATCH /api/v2/dags/d for 2s \(HTTP 500\); its SQLite database is locked: "
                  rf"write lock: pid {holder.pid} ")
        with pytest.raises(AirflowUnansweredError, match=locked):
            client.call("PATCH", "/api/v2/dags/d", {"is_paused": True}, "token", timeout=2.0)
    finally:
        server.shutdown()


def test_a_call_waits_longer_than_a_sqlite_writer_waits_for_the_lock():
    """Otherwise a call the lock held up gives up just as the API's 500 comes, and is never asked again."""
    assert CALL_TIMEOUT_S > SQLITE_BUSY_TIMEOUT_S + 10
    assert inspect.signature(AirflowRestClient.call).parameters["timeout"].default == CALL_TIMEOUT_S
