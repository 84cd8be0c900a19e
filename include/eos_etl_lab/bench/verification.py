"""The bench's cheap correctness checks after each case: what the output topics hold against what the case
says it wrote, committed offsets against the window (the independent checker judges record by record)."""

from __future__ import annotations

#: How long a committed transaction's markers may take to reach every output partition.
MARKERS_SETTLE_S = 10.0


def topic_counts(topic: str, target) -> tuple[int, int, int]:
    parts = target.admin.partitions(topic)
    offs = target.admin.offsets(topic, parts)
    hw = sum(o.high_watermark - o.earliest for o in offs.values())
    lso = sum(o.last_stable - o.earliest for o in offs.values())
    return hw, lso, len(parts)


def output_counts(settings, target) -> tuple[int, int, int]:
    """(high watermarks, last stable offsets, partitions) summed over the pipeline's output topics."""
    t = settings.topics
    hw = lso = nparts = 0
    for topic in (t.invoices, t.shipments, t.dead_letters):
        h, s, n = topic_counts(topic, target)
        hw, lso, nparts = hw + h, lso + s, nparts + n
    return hw, lso, nparts


def settled_output_counts(settings, target) -> tuple[int, int, int]:
    """:func:`output_counts` once every committed transaction's markers are written: a commit returns
    when the coordinator has logged it, and it writes the markers to the output partitions after that
    (a slot's transaction touches every output partition: hundreds of markers). A transaction still
    open after MARKERS_SETTLE_S is one a run left open, which the check reports."""
    t = settings.topics
    for topic in (t.invoices, t.shipments, t.dead_letters):
        target.admin.settled_offsets(topic, timeout_s=MARKERS_SETTLE_S, poll_s=0.2)
    return output_counts(settings, target)


def verify(case: str, row: dict, settings, window, target,
           before: tuple[int, int, int] = (0, 0, 0)) -> list[str]:
    """``before``: the output topics' counts before this run (a pipeline run again), subtracted."""
    problems: list[str] = []
    t = settings.topics
    res = row["result"]
    purchases, outputs = row["purchases"] or 0, row["outputs"] or 0
    if case == "SC-stage":  # publishes nothing; the noop sink (transform) counts nothing back
        seen = row["purchases"]
        return [] if seen in (None, row["window_purchases"]) else [f"the stage saw {seen} of "
                                                                   f"{row['window_purchases']} records"]
    if case in ("S", "SC", "B3", "Q", "KS", "R") and purchases != row["window_purchases"]:
        problems.append(f"purchases {purchases} != window {row['window_purchases']}")
    if case == "R":
        return problems
    if outputs != 2 * purchases:
        problems.append(f"outputs {outputs} != 2 x purchases {purchases}")
    hw, lso, nparts = settled_output_counts(settings, target)
    hw, lso = hw - before[0], lso - before[1]
    row["topic_records_hw"] = hw
    if case in ("B1", "B3"):
        # Non-transactional: offsets are records, exactly.
        if hw != outputs:
            problems.append(f"output topics hold {hw} records, expected {outputs}")
    else:
        # Transactional: offsets = records + one marker per touched partition per transaction.
        txns = row["transactions"]
        if hw != lso:
            problems.append(f"open transaction left: high watermark {hw} != last stable {lso}")
        if txns is None and case in ("Q", "KS"):  # a peer does not say how many transactions it made
            if lso < outputs:
                problems.append(f"output topics span {lso} offsets for {outputs} records")
        elif not outputs <= lso <= outputs + ((txns or 0) + 1) * nparts:
            problems.append(f"output topics span {lso} offsets for {outputs} records and {txns} transactions")
        parts = sorted(window.ranges)
        committed = target.admin.committed_offsets(settings.group, t.purchases, parts)
        if case in ("S", "SC") or (case == "B2" and purchases == window.span):
            want = {p: r.end for p, r in window.ranges.items()}
        elif case == "N":
            want = {int(p): e for p, e in res.get("ends", {}).items()}
            committed = {p: c for p, c in committed.items() if p in want}
        else:
            want = None
        if want is not None and committed != want:
            problems.append(f"committed offsets {committed} != expected {want}")
    return problems
