"""The demo's account of where a DAG run's time went, from Airflow's own task records (broker-free)."""

from eos_etl.demo import task_durations


def test_tasks_in_start_order_with_the_whole_run_from_its_trigger():
    run = {"queued_at": "2026-11-26T10:00:00.000000Z", "start_date": "2026-11-26T10:00:01Z"}
    tasks = [
        {"task_id": "validate", "state": "success", "start_date": "2026-11-26T10:00:20Z",
         "end_date": "2026-11-26T10:00:29.5Z"},
        {"task_id": "plan_window", "state": "success", "start_date": "2026-11-26T10:00:02.5Z",
         "end_date": "2026-11-26T10:00:04Z"},
        {"task_id": "report", "state": "failed", "start_date": "2026-11-26T10:00:30Z",
         "end_date": "2026-11-26T10:00:33.25Z"},
        {"task_id": "never_ran", "state": "upstream_failed", "start_date": None, "end_date": None},
    ]
    lines = task_durations(run, tasks).splitlines()
    assert [line.split()[0] for line in lines[1:-2]] == ["plan_window", "validate", "report"]
    # Each task: its duration, and how long after the trigger or the previous task's end it started.
    assert lines[1].split()[1:5] == ["success", "1.5", "s", "started"] and lines[1].split()[5] == "2.5"
    assert lines[2].split()[2] == "9.5" and lines[2].split()[5] == "16.0"
    assert lines[3].split()[1:3] == ["failed", "3.2"] and lines[3].split()[5] == "0.5"
    assert lines[-2].split()[-5:] == ["14.2", "s", "/", "19.0", "s"]  # in tasks / between them
    assert lines[-1].split()[-2:] == ["33.2", "s"]  # queued -> the last task's end


class _FlakyApi:
    """Answers the trigger with the given HTTP codes first (as Airflow's API server does while SQLite
    stays locked), then with a run."""

    def __init__(self, codes):
        self.codes, self.calls = list(codes), []

    def call(self, method, path, body=None, token=None):
        import urllib.error

        self.calls.append((method, path, body))
        if self.codes:
            raise urllib.error.HTTPError(path, self.codes.pop(0), "busy", {}, None)
        return {"dag_run_id": "manual__1", "state": "queued"}


def test_the_demo_asks_again_when_the_api_server_answers_500_and_not_on_other_errors():
    import urllib.error

    import pytest

    from eos_etl.demo import trigger

    api = _FlakyApi([500, 503])
    assert trigger(api, "shop_invoicing", "t", pause_s=0)["dag_run_id"] == "manual__1" and len(api.calls) == 3
    with pytest.raises(urllib.error.HTTPError):
        trigger(_FlakyApi([500, 500, 500]), "shop_invoicing", "t", pause_s=0)
    refused = _FlakyApi([403])
    with pytest.raises(urllib.error.HTTPError):
        trigger(refused, "shop_invoicing", "t", pause_s=0)
    assert len(refused.calls) == 1
