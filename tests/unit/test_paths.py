"""Broker-free: the one helper that turns ids into path components."""

from __future__ import annotations

import pytest

from eos_etl.paths import safe_name


@pytest.mark.parametrize("text, expected", [
    ("manual__2026-11-23T16:11:02.123+00:00", "manual__2026-11-23T16_11_02.123_00_00"),
    ("shop_invoicing", "shop_invoicing"),
    ("..", "unnamed"),
    ("../../etc/passwd", "etc_passwd"),
    ("<script>alert(1)</script>", "script_alert_1_script"),
    ("", "unnamed"),
    (".hidden", "hidden"),
])
def test_safe_name_is_one_harmless_path_component(text, expected):
    name = safe_name(text)
    assert name == expected
    assert "/" not in name and name not in (".", "..") and not name.startswith(".")
