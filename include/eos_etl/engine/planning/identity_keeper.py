"""Recording the pipeline's identity (:mod:`..identity`): its birth, its adoption, its changes.

Every write is a compare-and-set on the record, serialised by one transactional id of its own
(:func:`~..identity.lock_id`): ``init_transactions`` (fences every earlier writer, aborts what it left
open), read the record read_committed, decide, commit the new version in a transaction of that id. A writer
fenced before its commit (another took the id meanwhile) reads again and decides again.

* :func:`proposal`: what a pipeline without a record would be recorded as: the grouping its positions were
  committed with (older versions named it in each checkpoint record), else the run's setting, else
  :data:`~..slots.DEFAULT_WRITER_SLOTS`; ``born: new`` only where nothing can have been published (no group
  offset, no checkpoint record, and the input topic created by this command or no output of the pipeline).
* :func:`establish`: writes a proposal (version 1). An adopted pipeline's legacy ids (one per partition, and
  every grouping its records name) are fenced before the record is ready: a process of an older version
  paused before this one knew of identities commits nothing after.
* :func:`change`: ``offsets reslot``: the next version naming the new grouping or prefix, ``fencing``; every
  id the record ever named fenced over every partition (:func:`finish`); then ``ready``. A plan that finds a
  change interrupted (``fencing``) finishes it the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from ...kafka.retry import START_PHASE_DEADLINE_S
from .. import checkpoint_log, identity, slots
from ..errors import ProducerFencedError, PublishError
from ..identity import BORN_ADOPTED, BORN_NEW, FENCING, READY, Identity
from ..pipeline import PipelineConfig
from ..publishing.producer import TransactionalProducer
from .recovery import fence_transactional_ids

log = logging.getLogger(__name__)

#: Writers of the record that may fence this one in a row before it gives up (each is a whole decision).
_ATTEMPTS = 5


def write(config: PipelineConfig, decide: Callable[[Identity | None], Identity | None]) -> Identity | None:
    """The compare-and-set: ``decide(current)`` after this writer holds the record's id; what it returns is
    committed (None, or the current record: nothing to write). Returns the record in force afterwards."""
    tid = identity.lock_id(config.group, config.input_topic)
    for _ in range(_ATTEMPTS):
        producer = TransactionalProducer(config.producer_settings_as(tid),
                                         retry_deadline_s=min(config.retry_deadline_s, START_PHASE_DEADLINE_S))
        try:
            producer.init_transactions()
            current = checkpoint_log.read_identity(config.connection, config.checkpoint_topic, config.group,
                                                   config.input_topic)
            new = decide(current)
            if new is None or new == current:
                return current
            producer.begin_transaction()
            producer.produce_to(config.checkpoint_topic, identity.PARTITION,
                                identity.key(config.group, config.input_topic), new.value())
            producer.commit_transaction()
            log.info("identity of group %s on %s: version %d recorded (%s, %s): %s", config.group,
                     config.input_topic, new.version, new.change, new.state, new.to_dict())
            return new
        except ProducerFencedError:
            log.warning("another writer of %s's identity took %s meanwhile: reading the record again",
                        config.group, tid)
        finally:
            producer.close()
    raise PublishError(f"the identity of group {config.group} on {config.input_topic} could not be recorded: "
                       f"{_ATTEMPTS} other writers took {tid} in a row")


def proposal(config: PipelineConfig, topic_id: str, positions, *, input_created: bool = False) -> Identity:
    """What the pipeline would be recorded as, from ``positions`` (a :class:`~.planner.Positions` read
    without a record; its states tell what was committed, its decisions what the lineage said)."""
    committed = positions.legacy_groupings()
    if config.writer_slots != slots.AS_COMMITTED:
        slots.check_grouping(config, committed)  # a legacy pipeline's grouping changes only by a reslot
    grouping = slots.resolve(config, committed)
    states = positions.states.values()
    untouched = all(s.group_offset is None and s.record is None for s in states)
    never_published = all(d.row.name in ("never-published", "never-committed") for d in positions.decisions.values())
    born = BORN_NEW if untouched and (input_created or never_published) else BORN_ADOPTED
    # An adopted pipeline's legacy ids could still commit (an older version's paused process): fenced before
    # the record is ready. A new one's could not: nothing of it ever committed.
    legacy = sorted({None, *committed.values()} - {grouping}, key=lambda g: -1 if g is None else g)
    retired = tuple((config.transactional_id_prefix, g) for g in legacy) if born == BORN_ADOPTED else ()
    return Identity(group=config.group, input_topic=config.input_topic, topic_id=topic_id,
                    transactional_id_prefix=config.transactional_id_prefix, writer_slots=grouping,
                    output_topics=tuple(config.output_topics), version=0, born=born,
                    state=FENCING if retired else READY, retired=retired,
                    change="first run" if born == BORN_NEW else "adopted")


def establish(config: PipelineConfig, proposed: Identity, partitions: list[int], *, change: str = "") -> Identity:
    """Record ``proposed`` (a :func:`proposal`) as version 1, unless another writer recorded one first (then
    that one, which the caller checks its settings against). Legacy ids fenced before it is ready."""
    first = replace(proposed, version=1, change=change or proposed.change)
    recorded = write(config, lambda current: first if current is None else None)
    if recorded is None:  # cannot happen: the write returns what it committed or what it found
        raise PublishError(f"the identity of group {config.group} on {config.input_topic} was not recorded")
    if recorded is first and first.state == FENCING:
        return finish(config, first, partitions)
    return recorded


def finish(config: PipelineConfig, recorded: Identity, partitions: list[int]) -> Identity:
    """A version still ``fencing``: every id it retired fenced over ``partitions``, then the version ``ready``
    (unless another writer moved the record on meanwhile: then what it wrote)."""
    for prefix, grouping in recorded.retired:
        fence_transactional_ids(replace(config, transactional_id_prefix=prefix, writer_slots=grouping), partitions)
    log.warning("%s: group %s's ids of %s fenced; %s owns its partitions", config.input_topic, config.group,
                ", ".join(f"{prefix} with {slots.describe(g)}" for prefix, g in recorded.retired),
                f"{recorded.transactional_id_prefix} with {slots.describe(recorded.writer_slots)}")

    def ready(current: Identity | None) -> Identity | None:
        if current is not None and current.version == recorded.version and current.state == FENCING:
            return replace(current, state=READY)
        return None

    return write(config, ready)


def change(config: PipelineConfig, recorded: Identity, topic_id: str, partitions: list[int]) -> Identity:
    """``offsets reslot``: ``config``'s prefix, grouping (its setting, or the recorded one) and output topics
    as the next version; every id the record named fenced; ready. Nothing to change: the record as it is
    (an interrupted change finished)."""
    grouping = recorded.writer_slots if config.writer_slots == slots.AS_COMMITTED else config.writer_slots
    same = (config.transactional_id_prefix == recorded.transactional_id_prefix and grouping == recorded.writer_slots
            and set(config.output_topics) == set(recorded.output_topics))
    if same:
        return finish(config, recorded, partitions) if recorded.state == FENCING else recorded
    target = recorded.changed_to(transactional_id_prefix=config.transactional_id_prefix, writer_slots=grouping,
                                 output_topics=tuple(config.output_topics), topic_id=topic_id, change="offsets reslot")

    def step(current: Identity | None) -> Identity | None:
        if current != recorded:
            raise PublishError(f"the identity of group {config.group} on {config.input_topic} changed while "
                               "offsets reslot read it (another reslot going on?): run it again")
        return target

    return finish(config, write(config, step), partitions)


def bound_for_run(config: PipelineConfig, window) -> PipelineConfig:
    """``config`` (bound to ``window``) checked against the recorded identity before the run reads or fences
    anything: its settings, and the version the window was planned with. A window planned by a read-only plan of
    a pipeline without a record (a library caller's ``plan()``) records one first, ``adopted`` (a read-only plan
    proved nothing), with the window's grouping, every legacy id fenced; a change recorded since it was planned
    (a version past 1, or another grouping) stops the run (exit 1: plan again)."""
    recorded = checkpoint_log.read_identity(config.connection, config.checkpoint_topic, config.group,
                                            config.input_topic)
    if recorded is None and not window.identity_version:
        legacy = tuple((config.transactional_id_prefix, g) for g in {None, config.writer_slots} - {config.writer_slots})
        adopted = Identity(group=config.group, input_topic=config.input_topic, topic_id=window.topic_id,
                           transactional_id_prefix=config.transactional_id_prefix, writer_slots=config.writer_slots,
                           output_topics=tuple(config.output_topics), version=0, born=BORN_ADOPTED,
                           state=FENCING if legacy else READY, retired=legacy, change="a run of an unrecorded plan")
        recorded = establish(config, adopted, window.partitions)
    if (not window.identity_version and recorded is not None and recorded.version == 1
            and recorded.writer_slots == config.writer_slots):
        # Planned before the pipeline's first record, whoever wrote it since: version 1 is no change yet, and its
        # grouping is the window's, so its ids are the window's.
        config = replace(config, identity_version=1)
    identity.require_current(config, recorded)
    return config


__all__ = ["BORN_NEW", "bound_for_run", "change", "establish", "finish", "proposal", "write"]
