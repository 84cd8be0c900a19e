"""The peers' table from the bench's rows, without running anything: the median repetition per case, the
checker's verdict as it found it, and the default route's ratios to each peer."""

from __future__ import annotations

from eos_etl_lab.bench.peers.comparison import markdown, page, summary


def row(case: str, job_s: float, cpu_s: float, *, ok: bool = True, violations: dict | None = None) -> dict:
    return {"peers": True, "case": case, "job_s": job_s, "cpu_s": cpu_s, "purchases": 1_000_000,
            "window_purchases": 1_000_000, "peak_rss_mb": 100.0, "ok": True, "name": f"{case}-{job_s}",
            "check": {"ok": ok, "violations": violations or {}}}


ROWS = [row("SC", 30.0, 60.0), row("SC", 20.0, 50.0), row("SC", 25.0, 55.0),
        row("Q", 50.0, 45.0), row("Q", 40.0, 40.0), row("Q", 45.0, 44.0),
        row("B3", 35.0, 70.0, ok=False, violations={"beyond_commit": 2_000_000}),
        {**row("S", 1.0, 1.0), "peers": False}]  # not a peer row: left out


def test_each_case_is_its_median_repetition_judged_by_its_checks():
    by_case = {c["case"]: c for c in summary(ROWS)}
    assert set(by_case) == {"SC", "Q", "B3"}
    assert by_case["SC"]["job_s"] == 25.0 and by_case["SC"]["per_s"] == 40_000
    assert by_case["Q"]["job_s"] == 45.0 and by_case["Q"]["cpu_s_per_m"] == 44.0
    assert by_case["SC"]["exactly_once"] and by_case["Q"]["exactly_once"]
    assert not by_case["B3"]["exactly_once"] and by_case["B3"]["violations"] == [{"beyond_commit": 2_000_000}]


def test_the_table_gives_the_default_routes_ratio_to_each_peer_and_names_what_the_checker_found():
    table = markdown(ROWS)
    q = next(line for line in table.splitlines() if line.startswith("| Q "))
    assert f"{40_000 / (1_000_000 / 45.0):.2f}x / {44.0 / 55.0:.2f}x" in q
    b3 = next(line for line in table.splitlines() if line.startswith("| B3 "))
    assert "NOT exactly once (beyond_commit 2,000,000)" in b3
    text = page({"rows": ROWS, "options": {"repeats": 3}, "meta": {}}, "python -m eos_etl_lab bench --only peers")
    assert table in text and "--only peers" in text
    # Q costs less CPU per purchase than SC here (44 against 55 CPU-s per million): the page says so and by how much.
    assert f"- **Q is ahead**: {55.0 / 44.0:.2f}x less CPU per purchase." in text
    assert "**B3 is ahead**" not in text and "**KS is ahead**" not in text
