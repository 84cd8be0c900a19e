"""The pipeline's identity: what a pipeline is, recorded once, read by everything that plans, runs or moves it.

Who may commit an input partition's offsets is a function of the pipeline's transactional-id prefix and
its grouping of partitions into writer slots (:mod:`.slots`). Ids of different groupings or prefixes never
fence each other, so these are not settings each run may bring: they are facts of the pipeline, recorded
in one record and read from there alone (never from a run's flag, never from the metadata of the group's
offsets, which anyone may rewrite).

The record: key ``["<group>", "<input topic>", "identity"]`` in partition :data:`PARTITION` of the
pipeline's compacted checkpoint topic (:mod:`.checkpoint_log`; a reader of checkpoint records skips the
key), value the JSON of :class:`Identity`. Its writers serialise on one transactional id of their own,
:func:`lock_id`, which depends on nothing a run could set differently (group and input topic only):
whoever writes initialises it (fencing every earlier writer and aborting what it left open), reads the
record read_committed, decides, and commits the new version in a transaction of that id. Two writers that
raced: the later ``init_transactions`` fences the earlier one, whose commit fails and who reads again.
That is a compare-and-set (:mod:`.planning.identity_keeper`).

============================  ==========================================================================
who                           what it does with the record
============================  ==========================================================================
``create-topics``             writes version 1 if there is none (``born: new`` when nothing can have been
                              published from the input: it created the input topic, or no position and
                              no output of the pipeline exist)
a run's plan, the DAG's plan  reads it; none: writes it (``born: new`` as above, else ``adopted`` from
                              what the positions were committed with, fencing every legacy id first);
                              a run's settings that disagree stop the run (exit 2) before it reads a
                              position or fences anything
``plan-window``,              read it, write nothing (a pipeline without one is planned as its first
``offsets show``              run would record it)
every publisher               after its ``init_transactions``, reads it again: a version other than its
                              window's (the pipeline was changed meanwhile) or one still ``fencing``
                              stops it before it produces anything
``offsets reslot``            the one change: a new version naming the new grouping and prefix, state
                              ``fencing``; then every id the record ever named (``retired``) fenced over
                              every partition; then the same version ``ready``. A plan that finds
                              ``fencing`` (a change interrupted) finishes it the same way
============================  ==========================================================================

``born: new`` proves more than a first run: every commit of the pipeline writes a checkpoint record in
the same transaction, and the record's topic never deletes records by time. So while the identity born
new on the input's topic id exists, a partition with neither a group offset nor a record was never
published from, whatever retention did to the outputs (docs/positions.md, row ``never-committed``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from . import slots
from .errors import IdentityChangedError, IdentityMismatchError

#: The checkpoint topic's partition that holds the identity record.
PARTITION = 0
KEY_TAG = "identity"
BORN_NEW = "new"  # recorded before anything was published: no record, no offset means never published
BORN_ADOPTED = "adopted"  # recorded for a pipeline that had committed (or could not prove it had not)
READY = "ready"
FENCING = "fencing"  # a change recorded whose retired ids are not all fenced yet: nothing publishes


def key(group: str, input_topic: str) -> bytes:
    return json.dumps([group, input_topic, KEY_TAG], separators=(",", ":")).encode()


def lock_id(group: str, input_topic: str) -> str:
    """The transactional id the identity's writers serialise on: a function of what names the pipeline
    only, so writers with different settings still fence each other."""
    return f"{group}.identity.{input_topic}"


def _grouping_json(writer_slots: int | None):
    return "per-partition" if writer_slots is None else writer_slots


def _grouping_of(value) -> int | None:
    return None if value in (None, "per-partition") else int(value)


@dataclass(frozen=True)
class Identity:
    """What a pipeline is (see the module's docstring)."""

    group: str
    input_topic: str
    topic_id: str  # the input topic's id when the pipeline was made (or last changed)
    transactional_id_prefix: str
    writer_slots: int | None  # the grouping: S writer slots, or None (one transactional id per partition)
    output_topics: tuple[str, ...]
    version: int = 1
    born: str = BORN_NEW
    state: str = READY
    # Every (prefix, grouping) an earlier version named: their ids are fenced by each change.
    retired: tuple[tuple[str, int | None], ...] = ()
    created_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    changed_at_ms: int = 0
    change: str = ""  # what wrote this version: create-topics, first run, adopted, offsets reslot

    def value(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    def to_dict(self) -> dict:
        return {"group": self.group, "input_topic": self.input_topic, "topic_id": self.topic_id,
                "transactional_id_prefix": self.transactional_id_prefix,
                "writer_slots": _grouping_json(self.writer_slots), "output_topics": list(self.output_topics),
                "version": self.version, "born": self.born, "state": self.state,
                "retired": [[prefix, _grouping_json(s)] for prefix, s in self.retired],
                "created_at_ms": self.created_at_ms, "changed_at_ms": self.changed_at_ms,
                "change": self.change}

    @classmethod
    def from_dict(cls, data: dict) -> "Identity":
        return cls(group=str(data["group"]), input_topic=str(data["input_topic"]), topic_id=str(data["topic_id"]),
                   transactional_id_prefix=str(data["transactional_id_prefix"]),
                   writer_slots=_grouping_of(data["writer_slots"]),
                   output_topics=tuple(str(t) for t in data["output_topics"]), version=int(data["version"]),
                   born=str(data["born"]), state=str(data["state"]),
                   retired=tuple((str(p), _grouping_of(s)) for p, s in data.get("retired", ())),
                   created_at_ms=int(data["created_at_ms"]), changed_at_ms=int(data.get("changed_at_ms", 0)),
                   change=str(data.get("change", "")))

    @property
    def ready(self) -> bool:
        return self.state == READY

    def proves_never_published(self, topic_id: str) -> bool:
        """Born before anything was published, on the input topic as it is now: a partition with neither
        a group offset nor a checkpoint record was never published from."""
        return self.born == BORN_NEW and bool(topic_id) and self.topic_id == topic_id

    def named(self) -> list[tuple[str, int | None]]:
        """Every (prefix, grouping) this record ever named, the current one last."""
        current = (self.transactional_id_prefix, self.writer_slots)
        return [*(r for r in self.retired if r != current), current]

    def changed_to(self, *, transactional_id_prefix: str, writer_slots: int | None, output_topics: tuple[str, ...],
                   topic_id: str, change: str) -> "Identity":
        """The next version: the given settings, every id named so far retired, state :data:`FENCING`."""
        current = (transactional_id_prefix, writer_slots)
        return replace(self, transactional_id_prefix=transactional_id_prefix, writer_slots=writer_slots,
                       output_topics=tuple(output_topics), topic_id=topic_id or self.topic_id,
                       version=self.version + 1, state=FENCING,
                       retired=tuple(r for r in self.named() if r != current),
                       changed_at_ms=int(time.time() * 1000), change=change)


def decode(group: str, input_topic: str, raw_key: bytes | None, raw_value: bytes | None) -> Identity | None:
    """The identity a checkpoint-topic record holds for ``group`` and ``input_topic``; None for any other."""
    if raw_key != key(group, input_topic) or raw_value is None:
        return None
    try:
        found = Identity.from_dict(json.loads(raw_value))
    except (ValueError, TypeError, KeyError):
        return None
    return found if (found.group, found.input_topic) == (group, input_topic) else None


def settings_of(config) -> dict:
    """What a :class:`~.pipeline.PipelineConfig` says the pipeline is (its grouping may be ``as-committed``)."""
    return {"transactional_id_prefix": config.transactional_id_prefix, "writer_slots": config.writer_slots,
            "output_topics": tuple(config.output_topics)}


def change_command(config, identity: Identity | None = None) -> str:
    """The command that records ``config``'s settings as the pipeline's identity (fencing every id it named)."""
    grouping = config.writer_slots
    if grouping == slots.AS_COMMITTED and identity is not None:
        grouping = identity.writer_slots
    option = "" if grouping == slots.AS_COMMITTED else f" --writer-slots {slots.option(grouping)}"
    return (f"python -m eos_etl offsets reslot{option} --transactional-id-prefix {config.transactional_id_prefix} "
            f"--input-topic {config.input_topic} --group {config.group} (and this run's connection and output "
            "topic options; no run of the pipeline may be going on)")


def disagreements(identity: Identity, config) -> list[str]:
    """What ``config`` sets otherwise than the recorded ``identity`` (empty: it agrees)."""
    out = []
    if config.transactional_id_prefix != identity.transactional_id_prefix:
        out.append(f"transactional-id prefix {config.transactional_id_prefix!r} (recorded: "
                   f"{identity.transactional_id_prefix!r})")
    if config.writer_slots != slots.AS_COMMITTED and config.writer_slots != identity.writer_slots:
        out.append(f"{slots.describe(config.writer_slots)} (recorded: {slots.describe(identity.writer_slots)})")
    if set(config.output_topics) != set(identity.output_topics):
        out.append(f"output topics {', '.join(sorted(config.output_topics))} (recorded: "
                   f"{', '.join(sorted(identity.output_topics))})")
    return out


def check(identity: Identity, config) -> None:
    """Raise :class:`IdentityMismatchError` (exit 2) when ``config`` disagrees with the recorded ``identity``."""
    if found := disagreements(identity, config):
        raise IdentityMismatchError(
            f"group {config.group}'s pipeline on {config.input_topic} is recorded (identity version "
            f"{identity.version}, {identity.change or 'created'}) otherwise than this run's settings: "
            f"{'; '.join(found)}. Ids of another prefix or grouping would not fence the pipeline's, so nothing was "
            f"read, published or fenced; run with the recorded settings, or change the pipeline with "
            f"`{change_command(config, identity)}`")


def bind(config, identity: Identity):
    """``config`` publishing as ``identity`` says: its grouping and the version its publishers hold it to."""
    return replace(config, writer_slots=identity.writer_slots, identity_version=identity.version)


def require_current(config, identity: Identity | None) -> None:
    """What every publisher checks after its ``init_transactions`` (with the record read then): the identity is
    the version ``config`` was planned with, and ready. Raises :class:`IdentityChangedError` (exit 1: a
    new plan reads the new version) otherwise: no id of an older version may publish once a newer exists."""
    if identity is None and not config.identity_version:
        return  # a pipeline an older version made, published without a plan (the lab's, a library caller's)
    if identity is not None and identity.version == config.identity_version and identity.ready:
        check(identity, config)  # a window run under another prefix would publish unfenced beside the pipeline
        return
    now = ("none" if identity is None else
           f"version {identity.version} ({identity.change or 'created'}, {identity.state})")
    raise IdentityChangedError(
        f"the identity of group {config.group}'s pipeline on {config.input_topic} changed since this window was "
        f"planned (planned: version {config.identity_version}, now: {now}): this attempt published nothing more "
        "under its transactional ids; the next run plans again with the recorded identity")
