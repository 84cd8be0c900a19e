"""Every per-record check of the three record suites, and how a frame's records are counted and
sampled against them.

A check looks at one column of its suite's record frame and names the condition that makes a
record fail it. The one definition (:func:`record_checks`, from the pipeline's description,
:mod:`.checked_outputs`): the profile counts failing records with it (:mod:`.profile`), a failing
window's materialised frames are counted and sampled with it (:mod:`.record_frames`), and the
suites' expectations and messages are made from it (:mod:`.suites`).

Per record output: its standard checks (value schema, required fields, unique id, one per input
record, each where the output's ``checks`` name it) and its own value checks; for the pairs: a
primary record without companion, a companion without primary, a pair whose lineage or shared
fields differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import functions as F

from . import messages
from .checked_outputs import PAIRING, STANDARD_CHECKS, pairing_columns, record_outputs
from .window_reads import LINEAGE_COLUMNS

#: Failing rows sent to the driver per check, for the report.
EXAMPLE_LIMIT = 5
#: Example rows a check's own message tells (:attr:`RowCheck.example_columns`).
TOLD_EXAMPLES = 3
#: The uniqueness columns every record output's frame has (:func:`.record_frames.with_repeats`): they
#: compare records with each other, not a record's own value.
REPEAT_COLUMNS = ("repeated_id", "repeated_source")


@dataclass(frozen=True)
class RowCheck:
    """One check of a record suite: its table's column of that name counts, per input partition,
    the records whose ``column`` meets ``fails``."""

    name: str
    column: str  # the record frame's column it looks at
    fails: Callable  # column -> the condition that makes a record fail it
    noun: str  # what one record is, for the expectation's description and the message
    expects: str  # the expectation's description: "no <noun> fails: <expects>"
    describe: messages.Describe  # the failure's message
    example_columns: tuple[str, ...] = ()  # the rows its message tells (none: the column's values)


def _set(column):
    return column.isNotNull()


def _standard(record) -> dict[str, RowCheck]:
    """The checks every record output gets (their names: :data:`~.checked_outputs.STANDARD_CHECKS`)."""
    noun, id_column = record.noun, record.id_column
    schema, required, unique_id, one_per_source = (name.format(id=id_column) for name in STANDARD_CHECKS)
    shape = ", ".join(f"{name} {'decimal text' if name in record.decimals else type_}"
                      for name, type_ in record.fields)
    checks = [
        RowCheck(schema, "schema_mismatch", _set, noun,
                 f"every {noun} is a JSON object of the {noun} schema ({shape}): each field present has its type",
                 messages.mismatching_fields(noun)),
        RowCheck(required, "missing_required", _set, noun, f"{', '.join(record.required)} are set",
                 messages.rows(noun, "missing required field(s)")),
        RowCheck(unique_id, "repeated_id", _set, noun,
                 f"{id_column} is unique among the window's {noun}s",
                 messages.rows(noun, f"share a {id_column} with another {noun}")),
        RowCheck(one_per_source, "repeated_source", _set, noun,
                 "at most one per input record (lineage source_partition, source_offset)",
                 messages.surplus(noun, record.name)),
    ]
    return {c.name: c for c in checks}


def _own(record, check) -> RowCheck:
    """A value check of the pipeline's own, its message telling example rows where it says how."""
    if check.example is None:
        describe = messages.rows(record.noun, check.what)
    else:
        describe = messages.told_rows(record.noun, check.what, (record.name, check.name), check.example)
    return RowCheck(check.name, check.column, check.fails, record.noun, check.expects, describe,
                    tuple(check.example_columns) if check.example is not None else ())


def _record_checks(record) -> dict[str, RowCheck]:
    """A record output's checks in the order its ``checks`` give; every standard check placed once."""
    standard = _standard(record)
    checks = []
    for entry in record.checks:
        if isinstance(entry, str):
            if entry not in standard:
                raise ValueError(f"{record.name}: {entry!r} is no standard check of the output "
                                 f"(or is placed twice): {sorted(standard)}")
            checks.append(standard.pop(entry))
        else:
            checks.append(_own(record, entry))
    if standard:
        raise ValueError(f"{record.name}: the standard checks {sorted(standard)} are not placed in its checks")
    return {c.name: c for c in checks}


def _pairing_checks(outputs) -> dict[str, RowCheck]:
    primary, companion = outputs.primary.noun, outputs.companion.noun
    unpaired, orphan, mismatch = pairing_columns(outputs)
    key, shared = outputs.pair_key, outputs.pair_shared
    both = f"{', '.join(shared[:-1])} and {shared[-1]}" if len(shared) > 1 else "".join(shared)
    either = f"{', '.join(shared[:-1])} or {shared[-1]}" if len(shared) > 1 else "".join(shared)
    pair = f"{primary}/{companion} pair"
    article = "an" if primary[:1] in "aeiou" else "a"
    checks = [
        RowCheck(f"{primary}_has_{companion}", unpaired, _set, primary,
                 f"every {primary} has its {companion} (on {key})", messages.rows(primary, f"without {companion}")),
        RowCheck(f"{companion}_has_{primary}", orphan, _set, companion,
                 f"every {companion} has its {primary} (on {key})", messages.rows(companion, f"without {primary}")),
        RowCheck("pair_consistent", mismatch, _set, pair,
                 f"{article} {primary} and its {companion} share source partition/offset, {both}",
                 messages.rows(pair, f"whose lineage, {either} differ")),
    ]
    return {c.name: c for c in checks}


def record_checks(outputs) -> dict[str, dict[str, RowCheck]]:
    """suite -> check name -> its check, in order: the primary's suite, the companion's, the pairing."""
    primary, companion = record_outputs(outputs)
    return {primary.name: _record_checks(primary), companion.name: _record_checks(companion),
            PAIRING: _pairing_checks(outputs)}


def row_checks(outputs) -> dict[str, dict[str, tuple[str, Callable]]]:
    """suite -> check -> (the column of the suite's record frame it looks at, the condition on that
    column that makes a record fail it)."""
    return {suite: {name: (c.column, c.fails) for name, c in checks.items()}
            for suite, checks in record_checks(outputs).items()}


def value_checks(outputs) -> dict[str, dict[str, tuple[str, Callable]]]:
    """The checks a record's own value decides, per record output (the rest compare records with each
    other: uniqueness and pairing, which the profile decides by its fingerprints)."""
    return {suite: {name: check for name, check in checks.items() if check[0] not in REPEAT_COLUMNS}
            for suite, checks in row_checks(outputs).items() if suite != PAIRING}


# -- counted and sampled on a record frame (all in Spark; the caller gets a few rows) ----------------------


def failing(condition):
    """A check's condition as a count: a null comparison (a missing field) is not a failure of this check
    (the required-fields check counts it)."""
    return F.coalesce(condition, F.lit(False))


def failing_per_partition(frame, checks: dict) -> tuple[dict[str, dict[int, int]], dict[int, int]]:
    """(check -> source partition -> failing records, source partition -> records) of a suite's record
    frame, in one aggregate; ``checks``: check -> (column, condition), as in :func:`row_checks`."""
    rows = frame.groupBy("source_partition").agg(
        F.count(F.lit(1)).alias("records"),
        *(F.count_if(failing(cond(F.col(column)))).alias(name)
          for name, (column, cond) in checks.items())).collect()
    per_check = {name: {int(r["source_partition"]): int(r[name]) for r in rows if r["source_partition"] is not None}
                 for name in checks}
    return per_check, {int(r["source_partition"]): int(r["records"]) for r in rows if r["source_partition"] is not None}


def failing_rows(frame, column: str, condition, limit: int = EXAMPLE_LIMIT) -> list[dict]:
    """Up to ``limit`` rows of a record frame that fail a check: its column plus lineage."""
    shown = list(dict.fromkeys([column, *(c for c in LINEAGE_COLUMNS if c in frame.columns)]))
    rows = frame.where(failing(condition(F.col(column)))).select(*shown).limit(limit).collect()
    return [r.asDict(recursive=True) for r in rows]


def example_rows(frame, check: RowCheck, limit: int = TOLD_EXAMPLES) -> list[dict]:
    """Up to ``limit`` rows of a record frame that fail ``check``, with the columns its message tells."""
    rows = frame.where(failing(check.fails(F.col(check.column)))).select(*check.example_columns).limit(limit).collect()
    return [r.asDict() for r in rows]
