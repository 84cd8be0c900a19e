"""A Spark Connect server's state read from its files (eos_etl.embedded.connect_server_state), without a server:
an ended application (a stopped SparkContext) told from a running one, the event log and the log bounded."""

from __future__ import annotations

import os
import time

from eos_etl.embedded import connect_server_state as state


def _app(events, app_id: str, running: bool, files: int = 1):
    app = events / f"eventlog_v2_{app_id}"
    app.mkdir(parents=True)
    for n in range(1, files + 1):
        (app / f"events_{n}_{app_id}").write_text("{}\n")
    (app / (f"appstatus_{app_id}.inprogress" if running else f"appstatus_{app_id}")).write_text("")
    return app


def test_an_application_whose_event_log_ended_is_a_stopped_context(tmp_path):
    events = tmp_path / "events"
    assert not state.context_stopped(events)  # nothing started yet: nothing ended either
    old = _app(events, "local-1", running=False)
    os.utime(old, (time.time() - 60, time.time() - 60))
    new = _app(events, "local-2", running=True)
    assert not state.context_stopped(events)  # the newest (the server's own) runs; an earlier start ended
    (new / "appstatus_local-2.inprogress").rename(new / "appstatus_local-2")
    assert state.context_stopped(events)


def test_the_event_log_keeps_the_newest_files_of_the_newest_application(tmp_path):
    events = tmp_path / "events"
    old = _app(events, "local-1", running=False)
    os.utime(old, (time.time() - 60, time.time() - 60))
    new = _app(events, "local-2", running=True, files=5)
    state.prune_event_log(events, keep=2)
    assert not old.exists()
    assert sorted(p.name for p in new.glob("events_*")) == ["events_4_local-2", "events_5_local-2"]


def test_the_log_is_rotated_past_its_limit_and_read_from_an_offset(tmp_path):
    log = tmp_path / "server.out"
    log.write_text("a" * 10 + "tail")
    state.rotate_log(log, limit=100)
    assert log.read_text() == "a" * 10 + "tail"
    assert state.read_from(log, 10) == "tail" and state.read_from(tmp_path / "absent", 0) == ""
    state.rotate_log(log, limit=5)
    assert log.read_text() == "" and (tmp_path / "server.out.1").read_text() == "a" * 10 + "tail"


def test_jobs_that_started_and_did_not_end_are_in_flight(tmp_path):
    events = tmp_path / "events"
    assert state.jobs_in_flight(events) == set()
    app = _app(events, "local-1", running=True, files=2)
    (app / "events_1_local-1").write_text('{"Event":"SparkListenerJobStart","Job ID":0}\n'
                                          '{"Event":"SparkListenerJobEnd","Job ID":0}\n'
                                          '{"Event":"SparkListenerJobStart","Job ID":1}\n')
    assert state.jobs_in_flight(events) == {1}
    (app / "events_2_local-1").write_text('{"Event":"SparkListenerJobEnd","Job ID":1}\n')
    assert state.jobs_in_flight(events) == set()


def test_jobs_ended_counts_up_from_the_highest_ended_id_even_once_older_files_are_pruned(tmp_path):
    events = tmp_path / "events"
    assert state.jobs_ended(events) == 0
    app = _app(events, "local-1", running=True, files=2)
    (app / "events_1_local-1").write_text('{"Event":"SparkListenerJobEnd","Job ID":0}\n'
                                          '{"Event":"SparkListenerJobStart","Job ID":1}\n')
    assert state.jobs_ended(events) == 1  # job 1 started, not ended
    (app / "events_2_local-1").write_text('{"Event":"SparkListenerJobEnd","Job ID":1}\n'
                                          '{"Event":"SparkListenerJobEnd","Job ID":2}\n')
    (app / "events_1_local-1").unlink()
    assert state.jobs_ended(events) == 3
