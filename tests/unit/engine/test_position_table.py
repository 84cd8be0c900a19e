"""Broker-free: every combination of a partition's state, decided by ``engine.position.decide`` and
held against the table of docs/positions.md (parsed here: the page is the oracle, not the code).

Each generated case describes a world in the table's own words (the group's offset, the checkpoint
record and who wrote it, where the position lies against the input's log, whether the partition was
added since, what the outputs hold, the start policy), builds the state the planner would gather
from it, and expects the first row of the page's table whose cells all hold. The outputs are only
told to ``decide`` when it asks for the lineage, as the planner does.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

import pytest

from eos_etl.engine.checkpoint_log import CheckpointEntry
from eos_etl.engine.position import ROWS, Lineage, PartitionState, StartPolicy, Verdict, decide, lineage_position
from tests.support import ROOT

PAGE = ROOT / "docs" / "positions.md"
TOPIC_ID, OLD_ID = "new-topic-id", "old-topic-id"
PARTITION = 2

G_CASES = ("present", "absent: never committed", "absent: expired", "absent: group deleted")
C_CASES = ("this id", "other id", "no id", "absent")
WRITERS = ("a run", "an idle tick", "a start commit", "offsets restore", "offsets reset")
#: P category -> (position, log start, log end) variants
P_CASES = {
    "none": [(None, 0, 100), (None, 10, 100)],
    "0 on a log from 0": [(0, 0, 100), (0, 0, 0)],
    "within log": [(10, 10, 100), (50, 10, 100), (100, 10, 100), (7, 0, 7)],
    "past log end": [(150, 0, 100), (1, 0, 0)],
    "below log start": [(5, 10, 100), (0, 10, 100)],
}
PARTITION_CASES = ("known: records name it", "known: no record at all", "added")
IDENTITY_CASES = ("born new", "other")
OUTPUTS = {  # what the outputs hold -> what the pipeline's lineage reads of them
    "none": (Lineage.NONE, None),
    "others only": (Lineage.NONE, None),
    "own": (Lineage.FOUND, 40),
    "own, partly deleted": (Lineage.FOUND, 40),
    "others, partly deleted": (Lineage.NONE_TRUNCATED, None),
    "all deleted": (Lineage.NONE_TRUNCATED, None),
}


@dataclass(frozen=True)
class TableRow:
    name: str
    cells: dict[str, str]
    decision: str


def parse_table() -> list[TableRow]:
    text = PAGE.read_text()
    section = text.split("## The table", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows.append(TableRow(cells["row"], cells, cells["decision"]))
    return rows


TABLE = parse_table()


def holds(cell: str, value: str) -> bool:
    """A cell holds for ``value``: ``any``, the value itself, or one of its ``or`` alternatives."""
    return cell == "any" or value in [alt.strip() for alt in re.split(r"\bor\b", cell)]


@dataclass(frozen=True)
class World:
    g: str
    c: str
    writer: str
    p: str
    variant: tuple[int | None, int, int]
    partition: str
    outputs: str
    policy: StartPolicy
    g_differs: bool
    identity: str = "other"

    @property
    def name(self) -> str:
        return (f"G={self.g}|C={self.c} by {self.writer}|P={self.p} {self.variant}|{self.partition}|"
                f"outputs={self.outputs}|{self.policy.value}{'|G differs from C' if self.g_differs else ''}|"
                f"identity {self.identity}")

    def cells(self) -> dict[str, str]:
        """The world in the vocabulary of the table's cells."""
        return {"G": "present" if self.g == "present" else "absent", "C": self.c, "P": self.p,
                "partition": "added" if self.partition == "added" else "known", "identity": self.identity,
                "outputs": self.outputs}

    def state(self) -> PartitionState:
        position, log_start, log_end = self.variant
        g = position if self.g == "present" else None
        record = None
        if self.c != "absent":
            offset = position - 3 if self.g_differs and position is not None and position >= 3 else position
            topic_id = {"this id": TOPIC_ID, "other id": OLD_ID, "no id": ""}[self.c]
            record = CheckpointEntry(PARTITION, offset, 4, f"written by {self.writer}", 0, topic_id)
        known = {"known: records name it": 4, "known: no record at all": 0, "added": PARTITION}[self.partition]
        if record is not None:
            known = max(known, record.input_partitions)
        return PartitionState(PARTITION, TOPIC_ID, log_start, log_end, g, record, known,
                              born_new=self.identity == "born new")


def worlds():
    for g, c, writer, (p, variants), partition, outputs, policy, g_differs, identity in itertools.product(
            G_CASES, C_CASES, WRITERS, P_CASES.items(), PARTITION_CASES, OUTPUTS, StartPolicy, (False, True),
            IDENTITY_CASES):
        has_position = g == "present" or c != "absent"
        if (p == "none") == has_position:
            continue  # P is none exactly when neither G nor C holds a position
        if c == "absent" and writer != WRITERS[0]:
            continue  # no record, no writer
        if partition == "added" and c != "absent":
            continue  # a record of the partition itself names it
        if g_differs and not (g == "present" and c != "absent"):
            continue
        if has_position and (policy is not StartPolicy.EARLIEST or outputs not in ("own", "all deleted")):
            continue  # the policy and the outputs are asked only where no position is held: two suffice
        for variant in variants:
            yield World(g, c, writer, p, variant, partition, outputs, policy, g_differs, identity)


CASES = list(worlds())


def expected_row(world: World) -> TableRow:
    cells = world.cells()
    matches = [row for row in TABLE if all(holds(row.cells[k], v) for k, v in cells.items())]
    assert matches, f"the table has no row for {world.name}"
    return matches[0]


def decided(world: World):
    state = world.state()
    decision = decide(state, world.policy)
    if decision.verdict is Verdict.READ_LINEAGE:  # as the planner does: read the lineage, decide again
        lineage, offset = OUTPUTS[world.outputs]
        state = replace(state, lineage=lineage, lineage_offset=offset)
        decision = decide(state, world.policy)
    return state, decision


def expected_offset(row: TableRow, world: World, state: PartitionState) -> int | None:
    if row.decision == "start at 0":
        return 0
    if row.decision == "start at G":
        return state.group_offset
    if row.decision == "start at C":
        return state.record.next_offset
    if row.decision.startswith("fresh"):
        return state.log_start if world.policy is StartPolicy.EARLIEST else state.log_end
    return None


def test_the_page_and_the_code_name_the_same_rows():
    assert [row.name for row in TABLE] == [r.name for r in ROWS if r.verdict is not Verdict.READ_LINEAGE]
    assert {row.name for row in TABLE} <= {r.name for r in ROWS}


def test_hundreds_of_worlds_are_generated_and_every_row_is_reached():
    assert len(CASES) > 1000, len(CASES)
    reached = {expected_row(world).name for world in CASES}
    assert reached == {row.name for row in TABLE}, {row.name for row in TABLE} - reached


@pytest.mark.parametrize("world", CASES, ids=lambda w: f"{expected_row(w).name}:{w.name}")
def test_decide_answers_every_world_with_the_row_of_the_table(world):
    row = expected_row(world)
    state, decision = decided(world)
    if world.policy is StartPolicy.FAIL and row.decision.startswith("fresh"):
        assert decision.verdict is Verdict.STOP and decision.row.name == row.name
        return
    assert decision.row.name == row.name, (world.name, decision.row.name)
    stops = row.decision.startswith("stop")
    assert (decision.verdict is Verdict.STOP) == stops
    assert decision.offset == expected_offset(row, world, state)
    if stops:
        assert decision.row.recovery is not None
        assert decision.row.recovery.value in row.cells["command"]
    if row.name == "lineage-found":
        assert lineage_position(state) == 41  # one past the largest source offset the outputs name


def test_the_decision_never_depends_on_who_wrote_the_record():
    by_world: dict[tuple, set[str]] = {}
    for world in CASES:
        by_world.setdefault(replace(world, writer="").name, set()).add(decided(world)[1].row.name)
    assert all(len(rows) == 1 for rows in by_world.values())


def test_a_stop_never_names_a_position_and_a_start_never_lies_outside_the_log():
    for world in CASES:
        state, decision = decided(world)
        if decision.verdict is Verdict.STOP:
            assert decision.offset is None
        else:
            assert state.log_start <= decision.offset <= state.log_end, world.name
