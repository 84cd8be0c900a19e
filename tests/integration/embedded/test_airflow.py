"""The local Airflow starts, logs in and stops (eos_etl.embedded.airflow); its settings and the DAGs'
import without a running Airflow: tests/unit/embedded/test_airflow.py.

Airflow is never imported into the pytest process: every Airflow call runs in a subprocess with
:meth:`EmbeddedAirflow.env`, pointed at a temporary home, so neither ``~/airflow`` nor the
project's ``var/airflow`` is touched.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from eos_etl.embedded.airflow_rest import HEALTH_PATH, TOKEN_PATH
from eos_etl.host.ports import port_is_free
from eos_etl.host.process import session_members
from tests.support.embedded_airflow import _free_ports_airflow

# Straight to our loopback API server, whatever http(s)_proxy says.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _post_token(url: str, username: str, password: str) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + TOKEN_PATH,
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with _http.open(req, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, {}


@pytest.mark.slow
def test_airflow_starts_logs_in_and_stops(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    af = _free_ports_airflow(home, password="test-pw-123")
    started = time.monotonic()
    try:
        af.start()
        print(f"airflow ready in {time.monotonic() - started:.1f}s")
        pid = af.pid()
        assert pid is not None

        with _http.open(af.url + HEALTH_PATH, timeout=30) as resp:
            assert resp.status == 200
            health = json.load(resp)
        assert health["metadatabase"]["status"] == "healthy"
        assert health["scheduler"]["status"] == "healthy"
        assert af.status().healthy

        user, password = af.login
        status, body = _post_token(af.url, user, password)
        assert status == 201 and body.get("access_token"), (status, body)
        # The token is accepted by the REST API.
        req = urllib.request.Request(
            af.url + "/api/v2/dags", headers={"Authorization": f"Bearer {body['access_token']}"}
        )
        with _http.open(req, timeout=30) as resp:
            assert resp.status == 200
        assert af.rest.token()
        # A wrong password is refused.
        assert _post_token(af.url, user, "wrong")[0] == 401

        # Airflow used the password file we wrote; it did not generate one.
        assert json.loads(af.passwords_file.read_text()) == {user: password}
        assert af.passwords_file.stat().st_mode & 0o077 == 0
        assert (home / "airflow.db").is_file()
        for log_file in af.log_dir.glob("*.log"):  # supervisord's and every component's
            assert password not in log_file.read_text(errors="replace"), log_file
    finally:
        af.stop()

    assert af.pid() is None
    assert not af.pid_file.exists()
    assert session_members(pid) == []
    assert port_is_free(af.port)
    assert not af.status().running
