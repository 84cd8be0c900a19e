"""Airflow 3's REST API, as one user: health, a login token, calls, waiting for DAG runs.

:attr:`eos_etl.embedded.airflow.EmbeddedAirflow.rest` gives one for the
project's own Airflow (its URL and admin login). Requests go straight to the
API server, never through an ``http(s)_proxy``: it is on this machine.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StackError
from .errors import AirflowUnansweredError
from .sqlite_locks import lock_holders

log = logging.getLogger(__name__)

HEALTH_PATH = "/api/v2/monitor/health"
TOKEN_PATH = "/auth/token"
FINISHED_RUN_STATES = ("success", "failed")

# Calls that delete dag_run rows: a run deleted under the scheduler makes its next flush fail with
# StaleDataError and the scheduler exit (docs/airflow-supervision.md). This client never makes them;
# re-running a run is its /clear.
_DELETES_RUNS = (("DELETE", "/api/v2/dags/"),)
# ... and one that deletes them only when SQLite is locked: a backfill's creation refused by the lock
# cleans up after itself with DELETE ... WHERE backfill_id, taking a reprocessed run with it. Refused on
# the embedded SQLite stack (``db_file``) only; on PostgreSQL (compose) a backfill is an ordinary call.
_DELETES_RUNS_ON_SQLITE = (("POST", "/api/v2/backfills"),)

# How long a call keeps asking: longer than a SQLite writer waits for the lock
# (embedded.airflow.SQLITE_BUSY_TIMEOUT_S, 30 s), so a call the lock held up gets the API's
# 500 and asks again, instead of giving up just as the answer comes.
CALL_TIMEOUT_S = 75.0

# Talks to our own API server directly, even when an http(s)_proxy is set.
_local_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class AirflowRestClient:
    url: str
    username: str
    password: str = field(repr=False)
    # Where the password Airflow checks is kept, named when a login is refused.
    password_source: str = "the Airflow login"
    # The embedded stack's SQLite database: a call left unanswered names who holds its lock.
    db_file: Path | None = None

    def health(self, timeout: float = 5.0) -> dict[str, str | None]:
        """Component -> status from the health endpoint; empty if the API does not answer."""
        try:
            with _local_http.open(self.url + HEALTH_PATH, timeout=timeout) as resp:
                body: dict[str, Any] = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return {}
        return {name: (info or {}).get("status") for name, info in body.items()}

    def token(self, timeout: float = 30.0) -> str:
        """A JWT for the REST API (``Authorization: Bearer ...``), from POST /auth/token."""
        req = urllib.request.Request(
            self.url + TOKEN_PATH,
            data=json.dumps({"username": self.username, "password": self.password}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with _local_http.open(req, timeout=timeout) as resp:
                return json.load(resp)["access_token"]
        except urllib.error.HTTPError as e:
            raise StackError(
                f"Airflow at {self.url} refused the login of user '{self.username}' (HTTP {e.code}); "
                f"the password in {self.password_source} is the one Airflow checks"
            ) from None
        except (urllib.error.URLError, OSError) as e:
            raise StackError(f"Airflow does not answer on {self.url} ({e}); is it running?") from None

    def call(self, method: str, path: str, body: dict | None = None, token: str | None = None,
             timeout: float = CALL_TIMEOUT_S):
        """One REST API call (``path`` like ``/api/v2/dags``); returns the decoded JSON.

        HTTP errors propagate as ``urllib.error.HTTPError`` so callers can act on the status.
        An idempotent call (not POST) that gets a 500 or 503 is asked again, for up to
        ``timeout`` seconds: with SQLite, a write that meets the scheduler's open write
        transaction fails with "database is locked" and the API answers 500. A call left
        unanswered, or refused by the lock until ``timeout``, names the lock's holder.
        """
        refused = _DELETES_RUNS + (_DELETES_RUNS_ON_SQLITE if self.db_file is not None else ())
        for refused_method, prefix in refused:
            if method.upper() == refused_method and path.startswith(prefix):
                raise StackError(
                    f"{method} {path} can delete DAG runs the scheduler holds (and then the scheduler crashes); "
                    "re-run a run with POST /api/v2/dags/<dag_id>/dagRuns/<run_id>/clear instead"
                )
        deadline = time.monotonic() + timeout
        while True:
            req = urllib.request.Request(
                self.url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                headers={"Content-Type": "application/json",
                         **({"Authorization": f"Bearer {token}"} if token else {})},
            )
            try:
                with _local_http.open(req, timeout=max(1.0, deadline - time.monotonic())) as resp:
                    return json.loads(resp.read() or b"null")
            except TimeoutError as exc:
                raise AirflowUnansweredError(
                    f"Airflow's API server did not answer {method} {path} within {timeout:.0f}s"
                    + self._lock_held()) from exc
            except urllib.error.HTTPError as exc:
                if method == "POST" or exc.code not in (500, 503):
                    raise
                if time.monotonic() > deadline:
                    held = self._lock_held()
                    if not held:
                        raise
                    raise AirflowUnansweredError(
                        f"Airflow's API server refused {method} {path} for {timeout:.0f}s (HTTP {exc.code})"
                        + held) from exc
                log.info("Airflow answered %s %s with HTTP %d; asking again", method, path, exc.code)
                time.sleep(1.0)

    def _lock_held(self) -> str:
        """``; its SQLite database is locked: <holders>``, or nothing when no process holds its lock."""
        held = lock_holders(self.db_file) if self.db_file is not None else []
        return f"; its SQLite database is locked: {'; '.join(held)}" if held else ""

    def wait_for_runs_to_settle(self, dag_id: str, token: str, appear_s: float = 30.0,
                                finish_s: float = 180.0) -> None:
        """Let the runs the scheduler creates for a just-unpaused DAG appear and finish.

        On SQLite the scheduler's writes lock the whole database, so a backfill posted meanwhile
        may be refused: waiting first keeps the two apart.
        """
        path = f"/api/v2/dags/{dag_id}/dagRuns"
        deadline = time.monotonic() + appear_s
        while not self.call("GET", path, None, token)["dag_runs"]:
            if time.monotonic() > deadline:
                return  # the schedule created nothing: nothing to wait for
            time.sleep(1)
        deadline = time.monotonic() + finish_s
        while time.monotonic() < deadline:
            runs = self.call("GET", path, None, token)["dag_runs"]
            if all(r["state"] in FINISHED_RUN_STATES for r in runs):
                return
            time.sleep(2)


def database_busy(status: int, detail: str) -> bool:
    """Whether an API refusal is SQLite's one-writer lock (ask again) rather than a real error.

    Airflow answers 503 where it maps the lock itself (backfill creation) and 500 "Database
    error" where the lock surfaces at the request's commit instead.
    """
    return status == 503 or (status == 500 and "Database error" in detail)
