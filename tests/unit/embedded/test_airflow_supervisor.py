"""supervisord's configuration, its log and the reaper, without starting Airflow."""

from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eos_etl.embedded.airflow_reaper import fields, reap
from eos_etl.embedded.airflow_supervisor import (
    AFTER_API,
    API_SERVER,
    GROUP,
    PROGRAMS,
    config_text,
    exits,
    socket_path,
)
from eos_etl.host.process import ProcStat


def _config(tmp_path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(inline_comment_prefixes=(";",))
    parser.read_string(config_text(home=tmp_path, log_dir=tmp_path / "logs", airflow=Path("/venv/bin/airflow"),
                                   python=Path("/venv/bin/python"), socket=tmp_path / "s.sock"))
    return parser


def test_every_component_is_restarted_and_only_the_api_server_starts_by_itself(tmp_path):
    conf = _config(tmp_path)
    assert conf.get(f"group:{GROUP}", "programs").split(",") == list(PROGRAMS)
    for name in PROGRAMS:
        program = conf[f"program:{name}"]
        assert program["command"] == f"/venv/bin/airflow {name}"
        assert program["autorestart"] == "true" and program["stopasgroup"] == "true"
        assert program["autostart"] == ("true" if name == API_SERVER else "false")
        assert "environment" not in program  # connections (passwords) come from supervisord's environment
    assert [conf.getint(f"program:{n}", "priority") for n in (API_SERVER, *AFTER_API)] == [10, 20, 30, 40]
    assert conf["unix_http_server"]["chmod"] == "0700" and "password" not in conf["unix_http_server"]
    assert conf["eventlistener:reaper"]["events"] == "PROCESS_STATE_EXITED"
    assert "inet_http_server" not in conf  # nothing listens on a network port


def test_the_control_socket_fits_sun_path_however_deep_the_home(tmp_path):
    assert socket_path(tmp_path) == tmp_path / "supervisor.sock"
    deep = tmp_path / ("d" * 120) / "airflow"
    path = socket_path(deep)
    assert len(str(path)) <= 100 and path.parent.stat().st_mode & 0o077 == 0
    assert socket_path(deep) == path and socket_path(tmp_path / "other" / ("d" * 120)) != path


def test_deaths_are_read_from_the_current_supervisord_only(tmp_path):
    log = tmp_path / "supervisord.log"
    log.write_text(
        "2026-11-28 06:00:00,000 INFO supervisord started with pid 10\n"
        "2026-11-28 06:01:00,000 WARN exited: scheduler (terminated by SIGKILL; not expected)\n"
        "2026-11-28 06:10:00,000 INFO supervisord started with pid 20\n"
        "2026-11-28 06:11:00,000 INFO spawned: 'scheduler' with pid 21\n"
        "2026-11-28 06:12:00,000 WARN exited: triggerer (exit status 1; not expected)\n"
        "2026-11-28 06:13:00,000 WARN exited: reaper (terminated by SIGKILL; not expected)\n"
        "2026-11-28 06:14:00,000 INFO exited: dag-processor (exit status 0; expected)\n"
    )
    found = exits(log)
    assert [(e.program, e.at, e.how, e.expected) for e in found] == [
        ("triggerer", "2026-11-28 06:12:00,000", "exit status 1", False),
        ("dag-processor", "2026-11-28 06:14:00,000", "exit status 0", True),
    ]
    assert exits(tmp_path / "absent.log") == []


def test_the_reaper_kills_a_dead_components_group_and_stops_its_tasks(tmp_path):
    """A 'component' whose worker ignores SIGTERM and runs a 'task' in a group of its own: the group is
    SIGKILLed, the task gets SIGTERM."""
    marker = tmp_path / "task-got-sigterm"
    script = f"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)            # like an idle LocalExecutor worker
task = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time, pathlib
signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(marker)!r}).touch(), sys.exit(0)))
print("ready", flush=True)
time.sleep(60)
'''], process_group=0, stdout=subprocess.PIPE)
task.stdout.readline()
print(task.pid, flush=True)
time.sleep(60)
"""
    component = subprocess.Popen([sys.executable, "-c", script], process_group=0, stdout=subprocess.PIPE, text=True)
    task_pid = int(component.stdout.readline())
    assert ProcStat.read(task_pid).pgrp == task_pid != component.pid
    assert reap({"processname": "scheduler", "groupname": GROUP, "pid": str(component.pid)}) == component.pid
    assert component.wait(10) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while not marker.exists():
        assert time.monotonic() < deadline, "the task never got SIGTERM"
        time.sleep(0.05)
    # Not Airflow's, or already gone: nothing to do.
    assert reap({"groupname": "other", "pid": str(os.getpid())}) is None
    assert reap({"groupname": GROUP, "pid": str(component.pid)}) is None


def test_the_reaper_speaks_supervisors_event_protocol():
    proc = subprocess.Popen([sys.executable, "-m", "eos_etl.embedded.airflow_reaper"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"READY\n"
    payload = b"processname:scheduler groupname:other from_state:RUNNING expected:0 pid:1"
    proc.stdin.write(b"ver:3.0 server:supervisor serial:1 pool:reaper poolserial:1 eventname:PROCESS_STATE_EXITED "
                     + f"len:{len(payload)}\n".encode() + payload)
    proc.stdin.flush()
    assert proc.stdout.read(len(b"RESULT 2\nOK")) == b"RESULT 2\nOK"
    assert proc.stdout.readline() == b"READY\n"
    proc.stdin.close()  # supervisord gone: the listener ends
    assert proc.wait(10) == 0
    assert fields("a:1 b:x:y junk") == {"a": "1", "b": "x:y"}


def test_the_rest_client_never_makes_a_call_that_deletes_runs(tmp_path):
    """Deleting a run the scheduler holds crashes the scheduler with StaleDataError: the client refuses
    before any request is sent. A backfill's creation deletes runs only when SQLite's lock refuses it, so
    the client refuses it on the embedded SQLite stack (its db_file) and sends it to any other Airflow
    (compose's, on PostgreSQL)."""
    import urllib.error

    from eos_etl.embedded.airflow_rest import AirflowRestClient
    from eos_etl.errors import StackError

    unreachable = "http://127.0.0.1:9"  # nothing listens on port 9
    on_sqlite = AirflowRestClient(unreachable, "admin", "pw", db_file=tmp_path / "airflow.db")
    elsewhere = AirflowRestClient(unreachable, "admin", "pw")
    for client in (on_sqlite, elsewhere):
        for method, path in (("DELETE", "/api/v2/dags/shop/dagRuns/r1"), ("delete", "/api/v2/dags/shop")):
            with pytest.raises(StackError, match="/clear instead"):
                client.call(method, path, {}, "token")
    with pytest.raises(StackError, match="/clear instead"):
        on_sqlite.call("POST", "/api/v2/backfills", {}, "token")
    with pytest.raises(urllib.error.URLError):
        elsewhere.call("POST", "/api/v2/backfills", {}, "token", timeout=2)  # sent: nothing answers
    with pytest.raises(StackError, match="does not answer"):
        elsewhere.token(timeout=2)  # the same client reaches the network for anything else


def test_stop_also_stops_an_airflow_standalone_the_project_started_before(tmp_path):
    """A stack started before the upgrade recorded standalone.pid: `make down` still stops its session."""
    from eos_etl.embedded.airflow import EmbeddedAirflow
    from eos_etl.host.process import PidFile

    af = EmbeddedAirflow(home=tmp_path / "airflow")
    af.home.mkdir(parents=True)
    # A stand-in session leader whose child ignores SIGTERM, as idle LocalExecutor workers do.
    leader = subprocess.Popen([sys.executable, "-c", "import signal, subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                               "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); time.sleep(60)"],
                              start_new_session=True)
    PidFile(af.home / "standalone.pid").record(leader.pid)
    time.sleep(0.5)
    started = time.monotonic()
    af.stop(timeout=3)
    assert leader.wait(5) == -signal.SIGTERM
    assert time.monotonic() - started < 15
    assert not (af.home / "standalone.pid").exists()
    assert [p for p in os.listdir("/proc") if p.isdigit() and ProcStat.read(int(p)) is not None
            and ProcStat.read(int(p)).session == leader.pid and ProcStat.read(int(p)).state != "Z"] == []
