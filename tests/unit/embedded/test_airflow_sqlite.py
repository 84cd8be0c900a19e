"""The embedded Airflow's SQLite transactions are real: a rolled-back transaction takes its released
savepoints with it (what keeps a refused backfill from deleting runs it had re-tagged)."""

from __future__ import annotations

import subprocess
import sys

from eos_etl.embedded.airflow import EmbeddedAirflow

# A savepoint right after a commit, released, then the transaction rolled back: how many rows stay.
_SCRIPT = """
from airflow import settings
from sqlalchemy import text
with settings.engine.connect() as c:
    c.execute(text("CREATE TABLE probe (x INTEGER)"))
    c.commit()
    with c.begin_nested():
        c.execute(text("INSERT INTO probe VALUES (1)"))
    c.rollback()
    print("ROWS", c.execute(text("SELECT count(*) FROM probe")).scalar())
    print("FK", c.execute(text("PRAGMA foreign_keys")).scalar(), c.execute(text("PRAGMA journal_mode")).scalar())
"""


def _rows_after_rollback(af: EmbeddedAirflow) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=af.env(), cwd=af.home, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("ROWS", "FK")))
    return int(lines["ROWS"]), lines["FK"]


def test_a_rolled_back_transaction_takes_its_released_savepoints_with_it(tmp_path):
    embedded = EmbeddedAirflow(home=tmp_path / "embedded")
    embedded.prepare_home()
    assert _rows_after_rollback(embedded) == (0, "1 wal")  # Airflow's PRAGMAs still apply
    # Plain Airflow on pysqlite's legacy transactions: the savepoint committed, the rollback undid nothing.
    plain = EmbeddedAirflow(home=tmp_path / "plain")
    plain.prepare_home()
    plain.local_settings_file.unlink()
    assert _rows_after_rollback(plain) == (1, "1 wal")
