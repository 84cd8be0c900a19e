"""``offsets {show,restore,reset,reslot}``: each input partition's position and the row of docs/positions.md
that decides it, the pipeline's identity, and the operator's commands that move them.

show: nothing is written. restore: commit the positions the checkpoint records or the outputs' lineage prove.
reset: commit a position an operator decides for the partitions named. reslot: record this command's prefix,
writer slots and output topics as the pipeline's identity, fencing every transactional id the record ever named
(no run may be going on). The last three record the identity of a pipeline that has none first.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ..engine import identity
from ..engine.planning import identity_keeper
from ..engine.planning.planner import positions, recovery_command
from ..engine.position import Verdict, lineage_position
from ..engine.publishing.publisher import publish_without_spark, reset_positions
from ..engine.slots import describe as describe_slots
from ..engine.window import OffsetRange
from ..errors import ConfigurationError
from ..kafka.admin import ClusterAdmin
from .options import add_connection, add_shop, shop_settings_from_args


def add_offsets(sub) -> None:
    p = sub.add_parser("offsets", help="each input partition's position and the row of docs/positions.md that "
                       "decides it, and the pipeline's identity; restore: commit the positions the checkpoint "
                       "records or the outputs' lineage prove; reset: commit a position an operator decides for "
                       "the partitions named; reslot: record --writer-slots, --transactional-id-prefix and the "
                       "output topics as the pipeline's identity, fencing every transactional id it named before "
                       "(no run may be going on)")
    p.add_argument("action", choices=["show", "restore", "reset", "reslot"])
    p.add_argument("--from-lineage", action="store_true",
                   help="restore: also the partitions whose position only the outputs' lineage holds (one past "
                        "the largest source_offset this pipeline published from this topic)")
    p.add_argument("--to", choices=["earliest", "latest", "checkpoint"],
                   help="reset: where the partitions start again: the input's earliest offset (every record the "
                        "partition holds now is published), its last stable offset (none of them is: the pipeline "
                        "is known to have published them all), or the checkpoint record's position (a record that "
                        "names no topic id, when the topic was not re-created since)")
    p.add_argument("--partitions", type=partition_list, metavar="0,1",
                   help="reset: the input partitions to reset (the run's error line names them)")
    add_connection(p)
    add_shop(p)
    p.set_defaults(func=cmd_offsets)


def partition_list(text: str) -> list[int]:
    try:
        parts = sorted({int(p) for p in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--partitions: expected partition numbers like 0,1, got {text!r}") from None
    if any(p < 0 for p in parts):
        raise argparse.ArgumentTypeError(f"--partitions: partition numbers are never negative: {text!r}")
    return parts


#: The rows each reset may act on (docs/positions.md): any other partition's position is known, or
#: its records were published, and the reset would republish or skip them.
RESETTABLE = {
    "earliest": {"other-topic", "other-topic-at-zero", "record-without-id", "beyond-log-end", "below-log-start",
                 "unprovable", "new-partition", "never-published", "never-committed"},
    "checkpoint": {"record-without-id"},
}
RESETTABLE["latest"] = RESETTABLE["earliest"]


def cmd_offsets(args) -> int:
    """Each input partition's position, as :func:`~eos_etl.engine.position.decide` has it; ``restore``
    commits the ones the checkpoint records or the lineage prove; ``reset`` commits the operator's; ``reslot``
    records a change of the pipeline's identity. All refuse (exit 2, nothing moved) a partition whose state
    they would make wrong."""
    settings = shop_settings_from_args(args)
    pipeline = settings.pipeline()
    if args.action == "reset" and not (args.to and args.partitions):
        raise ConfigurationError("offsets reset needs --to earliest|latest|checkpoint and --partitions (e.g. "
                                 "--partitions 0,1): it moves the pipeline's position, so it is given explicitly")
    if args.action != "reset" and (args.to or args.partitions):
        raise ConfigurationError(f"--to and --partitions are for offsets reset, not offsets {args.action}")
    admin = ClusterAdmin(settings.connection)
    admin.check_reachable()
    parts = admin.partitions(pipeline.input_topic)
    # A reslot's settings are the change and show only reports: checked against nothing (a pipeline without
    # a record adopts what it committed, under this command's prefix, before a change).
    found = positions(admin, pipeline, parts, lineage_progress=lambda line: print(line, file=sys.stderr),
                      check_settings=args.action not in ("reslot", "show"))
    pipeline = replace(pipeline, input_topic_id=found.topic_id)  # the records it commits name this topic
    rows = {p: _offsets_row(found, p) for p in parts}
    recorded = found.identity

    def record() -> None:  # a command about to commit records the identity of a pipeline that has none first
        nonlocal pipeline, recorded
        if not found.recorded:
            recorded = identity_keeper.establish(pipeline, recorded, parts)
            if args.action != "reslot":
                identity.check(recorded, pipeline)
        if args.action != "reslot":
            pipeline = identity.bind(pipeline, recorded)

    if args.action == "reslot":
        record()
        recorded = identity_keeper.change(pipeline, recorded, found.topic_id, parts)
        for row in rows.values():
            row["writer_slots"] = recorded.writer_slots
        print(f"{pipeline.input_topic} of group {pipeline.group}: identity version {recorded.version}, published by "
              f"{recorded.transactional_id_prefix} with {describe_slots(recorded.writer_slots)} (positions "
              f"unchanged); every other id it named fenced", file=sys.stderr)
    elif args.action == "reset":
        todo = _reset_positions(pipeline, found, args.partitions, args.to)
        record()
        done = {r.partition: r.committed_before for r in reset_positions(pipeline, todo)}
        for p, before in done.items():
            rows[p].update(position=todo[p], reset_from=before, **{"from": f"reset to {args.to}"})
        print(f"reset {pipeline.input_topic} partitions {sorted(done)} of group {pipeline.group} to {todo} (group "
              "offsets and checkpoint records, one transaction per partition)", file=sys.stderr)
    elif args.action == "restore":
        todo = _restore_positions(pipeline, found, from_lineage=args.from_lineage)
        if todo:
            record()
            publish_without_spark(pipeline, {p: OffsetRange(o, o) for p, o in todo.items()})
            print(f"restored {pipeline.input_topic} partitions {sorted(todo)} for group {pipeline.group} "
                  "(group offsets and checkpoint records, one transaction per partition)", file=sys.stderr)
    print(json.dumps({"input_topic": pipeline.input_topic, "group": pipeline.group,
                      "checkpoint_topic": pipeline.checkpoint_topic, "topic_id": found.topic_id,
                      "identity": {**recorded.to_dict(), "recorded": recorded.version > 0},
                      "partitions": {str(p): row for p, row in rows.items()}}, indent=2))
    return 0


_SOURCES = {"group": "group", "checkpoint": "checkpoint topic", "lineage-found": "lineage",
            "new-partition": "start policy", "never-published": "start policy", "never-committed": "start policy",
            "other-topic-at-zero": "start policy"}


def _offsets_row(found, p: int) -> dict:
    state, decision = found.states[p], found.decisions[p]
    row = {"group_offset": state.group_offset,
           "checkpoint": state.record.to_dict() if state.record is not None else None,
           "input_earliest": state.log_start, "input_last_stable": state.log_end,
           "position": decision.offset, "from": _SOURCES.get(decision.row.name, "unknown"),
           "writer_slots": found.identity.writer_slots,
           "row": decision.row.name, "decision": decision.verdict.value, "why": decision.row.why}
    if decision.row.name == "lineage-found":
        row["position"] = lineage_position(state)
    return row


def _restore_positions(pipeline, found, *, from_lineage: bool) -> dict[int, int]:
    """The positions ``offsets restore`` commits: the checkpoint records' where the group's offsets are
    gone, the lineage's (with ``--from-lineage``) where both are. Refuses (the plan's own error) a
    partition it cannot restore: nothing is committed then."""
    todo, refused = {}, []
    for p, decision in found.decisions.items():
        if decision.row.name == "checkpoint":
            todo[p] = decision.offset
        elif decision.row.name == "lineage-found" and from_lineage:
            todo[p] = lineage_position(found.states[p])
        elif decision.verdict is Verdict.STOP:
            refused.append(p)
    if refused:
        replace(found, decisions={p: found.decisions[p] for p in refused}).raise_if_stopped(pipeline)
    return todo


def _reset_positions(pipeline, found, partitions: list[int], to: str) -> dict[int, int]:
    """The positions ``offsets reset --to TO`` commits; a partition whose row it would make wrong is
    refused (exit 2, nothing committed)."""
    if unknown := [p for p in partitions if p not in found.decisions]:
        raise ConfigurationError(f"--partitions {','.join(map(str, unknown))}: {pipeline.input_topic} has "
                                 f"partitions {min(found.decisions)}..{max(found.decisions)}")
    if refused := [p for p in partitions if found.decisions[p].row.name not in RESETTABLE[to]]:
        why = "; ".join(f"{pipeline.input_topic}[{p}] is in row {found.decisions[p].row.name} "
                        f"(position {found.decisions[p].offset})" for p in refused)
        hint = (f"its position is recovered with `{recovery_command(pipeline)}`"
                if any(found.decisions[p].row.name == "lineage-found" for p in refused)
                else "its position is known: a reset would publish its records again or skip them")
        raise ConfigurationError(f"offsets reset --to {to} refused: {why} (docs/positions.md); {hint}. "
                                 "Nothing was committed")
    if to == "checkpoint":
        return {p: found.states[p].record.next_offset for p in partitions}
    return {p: found.states[p].log_start if to == "earliest" else found.states[p].log_end for p in partitions}
