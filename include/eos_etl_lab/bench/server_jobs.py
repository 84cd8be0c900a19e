"""The Spark jobs a Spark Connect server ran, from its event log (a Connect client sees no job list): what a
validation cost the server, for the validation bench's size phase."""

from __future__ import annotations

import time

from eos_etl.embedded.connect_server_state import jobs_ended


def server_jobs(server, before: int | None = None) -> int:
    """Jobs the server ended (its event log, written behind: read until it stops moving), minus ``before``."""
    seen, t = jobs_ended(server.event_log_dir), time.monotonic()
    while time.monotonic() - t < 5.0:
        time.sleep(0.5)
        now = jobs_ended(server.event_log_dir)
        if now == seen:
            break
        seen = now
    return seen - (before or 0)
