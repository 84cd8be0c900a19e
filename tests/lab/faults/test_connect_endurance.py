"""The endurance run's measures, broker-free: growth between halves and sessions across a pruned event log."""

from eos_etl_lab.faults.connect_endurance import SessionCount, flatness

_STARTED = b'{"Event":"org.apache.spark.sql.connect.service.SparkListenerConnectSessionStarted","sessionId":"a"}\n'
_CLOSED = b'{"Event":"org.apache.spark.sql.connect.service.SparkListenerConnectSessionClosed","sessionId":"a"}\n'


def _samples(values):
    return [{"threads": v, "rss_mb": 100.0, "open_files": 10, "sessions": 1, "log_mb": 1.0,
             "idle_worker_monitors": 1} for v in values]


def test_flatness_is_growth_between_halves_after_the_warm_up():
    flat = flatness(_samples([500] * 10 + [90, 95, 100, 92] * 10 + [90, 110, 100, 95] * 10), warmup=10)
    assert flat["threads"] == 1.1 and flat["rss_mb"] == 1.0
    growing = flatness(_samples(list(range(50, 130))), warmup=0)
    assert growing["threads"] > 1.1


def test_sessions_survive_the_pruning_of_the_file_that_recorded_their_start(tmp_path):
    app = tmp_path / "eventlog_v2_local-1"
    app.mkdir()
    (app / "events_1_local-1").write_bytes(_STARTED + _STARTED)
    count = SessionCount(tmp_path)
    assert count() == 2
    (app / "events_1_local-1").unlink()  # rolled and pruned between windows
    (app / "events_2_local-1").write_bytes(b"{}\n")
    assert count() == 2
    (app / "events_2_local-1").write_bytes(b"{}\n" + _CLOSED)  # the in-progress file grows
    assert count() == 1
    assert SessionCount(tmp_path / "nothing")() is None
