"""Who holds a SQLite database's lock, from the kernel's table of file locks.

SQLite locks with POSIX advisory locks (``fcntl``), which Linux lists in
``/proc/locks`` with the holding process: when the embedded Airflow's API server
stops answering because a writer waits for the database, this names the process
that holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Byte offsets of SQLite's WAL-mode locks in the ``-shm`` file (sqlite3 wal.c: WAL_WRITE_LOCK is lock 0
#: of the 8 at offset 120; then the checkpointer's, the recovery's and the readers').
_SHM_LOCKS = {120: "write", 121: "checkpoint", 122: "recovery"}


def lock_holders(db_file: Path, locks_table: str = "/proc/locks") -> list[str]:
    """Who holds a lock on ``db_file`` that makes other writers wait: each POSIX write lock on its ``-shm``
    file's write, checkpoint or recovery byte (WAL mode), or any on the database file itself (rollback
    journal), as ``"<lock> lock: pid N (<command line>)"``. Linux's ``/proc/locks`` names the holding
    process; an empty list where there is none (or no such table)."""
    inodes = {}
    for path, kind in ((Path(f"{db_file}-shm"), "shm"), (Path(db_file), "db")):
        try:
            inodes[os.stat(path).st_ino] = kind
        except OSError:
            continue
    try:
        lines = Path(locks_table).read_text().splitlines()
    except OSError:
        return []
    held = []
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 7063 fe:00:9979504 21897 21899"
        if len(fields) < 8 or fields[1] != "POSIX" or fields[3] != "WRITE":
            continue
        kind = inodes.get(int(fields[5].rsplit(":", 1)[1]))
        if kind is None:
            continue
        start = int(fields[6])
        if kind == "shm" and start not in _SHM_LOCKS:
            continue  # a reader's mark: readers never make a writer wait in WAL mode
        pid = fields[4]
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            command = "?"
        held.append(f"{_SHM_LOCKS.get(start, 'database') if kind == 'shm' else 'database'} lock: pid {pid} "
                    f"({command[:120]})")
    return held
