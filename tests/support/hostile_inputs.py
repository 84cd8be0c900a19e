"""Hostile text for hypothesis, shared by tests/unit/cli/test_hostile_inputs.py and
tests/integration/cli/test_hostile_inputs.py."""

from __future__ import annotations

from hypothesis import strategies as st

HOSTILE_TEXT = st.sampled_from(["", "..", "../../etc/passwd", "a/b", "a b", "x\x00y", "<script>", "'; --",
                                "\u202etxt", "é", "${HOME}", "$(id)", "\n", "a" * 250, "-1", "0", "nan", "inf",
                                "1e9", "0x10", "2026-11-23T10:00:00", "2026-13-45T99:99:99Z", "yesterday"])
