"""Broker-free: the pipeline's identity record (engine.identity) and what its keeper proposes for a pipeline
that has none (engine.planning.identity_keeper.proposal), generated from the module's own table of who reads
and writes it. The real-broker behaviour (pause races, hand resets, partitions added between plan and run):
tests/integration/engine/test_pipeline_identity.py."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from eos_etl.engine import checkpoint_log, identity, slots
from eos_etl.engine.checkpoint_log import CheckpointEntry
from eos_etl.engine.errors import IdentityChangedError, IdentityMismatchError, WriterSlotsChangedError
from eos_etl.engine.identity import BORN_ADOPTED, BORN_NEW, FENCING, READY, Identity
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.planning.identity_keeper import proposal
from eos_etl.engine.planning.planner import Positions
from eos_etl.engine.position import Lineage, PartitionState, decide
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.kafka.admin import PartitionOffsets
from eos_etl.kafka.connection import KafkaConnection

TOPIC_ID = "tid"


def config(writer_slots=slots.AS_COMMITTED, prefix="shop", outputs=("invoices", "shipments")) -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("localhost:1"), input_topic="purchases", group="g",
                          output_topics=outputs, transactional_id_prefix=prefix, writer_slots=writer_slots)


def recorded(**changes) -> Identity:
    base = Identity(group="g", input_topic="purchases", topic_id=TOPIC_ID, transactional_id_prefix="shop",
                    writer_slots=2, output_topics=("invoices", "shipments"), version=1, created_at_ms=1)
    return replace(base, **changes)


def test_the_record_reads_back_as_written_and_checkpoint_readers_skip_it():
    for ident in (recorded(), recorded(writer_slots=None, born=BORN_ADOPTED, state=FENCING, version=3,
                                       retired=(("old", None), ("shop", 4)), change="offsets reslot")):
        raw_key, raw_value = identity.key("g", "purchases"), ident.value()
        assert identity.decode("g", "purchases", raw_key, raw_value) == ident
        assert checkpoint_log.decode("g", "purchases", raw_key, raw_value, 0) is None  # not a partition's entry
    assert identity.decode("g", "other-topic", identity.key("g", "purchases"), recorded().value()) is None
    assert identity.decode("g", "purchases", identity.key("g", "purchases"), b"{not json") is None
    entry = CheckpointEntry(0, 5, 2, "r", 0, TOPIC_ID)
    assert identity.decode("g", "purchases", checkpoint_log.key("g", "purchases", 0), entry.value()) is None


def test_the_lock_depends_on_nothing_a_run_could_set_otherwise():
    assert identity.lock_id("g", "purchases") == "g.identity.purchases"
    for cfg in (config(4, prefix="a"), config(None, prefix="b")):
        assert cfg.resources().identity_transactional_id == identity.lock_id("g", "purchases")
        assert any(g.resource == "transactional-id" and g.name == "g.identity.purchases" and not g.prefixed
                   for g in cfg.resources().grants("pipeline"))


SETTINGS = {  # a run's setting -> does it agree with recorded() (prefix shop, 2 slots, the two outputs)?
    "as recorded": (config(), True),
    "the recorded slots named": (config(2), True),
    "another count": (config(1), False),
    "per-partition": (config(None), False),
    "another prefix": (config(prefix="other"), False),
    "another prefix and count": (config(4, prefix="other"), False),
    "other outputs": (config(outputs=("invoices", "shipments", "extra")), False),
}


@pytest.mark.parametrize("name", SETTINGS)
def test_a_run_whose_settings_disagree_stops_with_the_command_that_changes_them(name):
    cfg, agrees = SETTINGS[name]
    if agrees:
        identity.check(recorded(), cfg)
        return
    with pytest.raises(IdentityMismatchError) as refused:
        identity.check(recorded(), cfg)
    line = str(refused.value)
    assert refused.value.exit_code == 2 and "nothing was read, published or fenced" in line
    assert "python -m eos_etl offsets reslot" in line
    assert f"--transactional-id-prefix {cfg.transactional_id_prefix}" in line
    if cfg.writer_slots != slots.AS_COMMITTED:
        assert f"--writer-slots {slots.option(cfg.writer_slots)}" in line


#: (record now, the version the window was planned with) -> may a publisher that just initialised go on?
PUBLISHER_CASES = {
    "the planned version, ready": (recorded(version=3), 3, True),
    "a newer version": (recorded(version=4), 3, False),
    "the planned version, still fencing": (recorded(version=3, state=FENCING), 3, False),
    "none recorded, none planned (an older version's pipeline)": (None, 0, True),
    "none recorded, one planned (the record deleted)": (None, 3, False),
    "recorded, planned before it was": (recorded(version=1), 0, False),
}


@pytest.mark.parametrize("name", PUBLISHER_CASES)
def test_a_publisher_goes_on_only_under_the_version_its_window_was_planned_with(name):
    now, planned, goes_on = PUBLISHER_CASES[name]
    cfg = replace(config(2), identity_version=planned)
    if goes_on:
        identity.require_current(cfg, now)
        return
    with pytest.raises(IdentityChangedError) as stopped:
        identity.require_current(cfg, now)
    assert stopped.value.exit_code == 1 and "published nothing more" in str(stopped.value)


def test_a_publisher_under_another_prefix_stops_even_on_the_planned_version():
    with pytest.raises(IdentityMismatchError):
        identity.require_current(replace(config(2, prefix="other"), identity_version=1), recorded())


def test_a_change_retires_every_pair_the_record_ever_named_and_waits_for_its_fencing():
    first = recorded()
    second = first.changed_to(transactional_id_prefix="shop", writer_slots=4, output_topics=first.output_topics,
                              topic_id=TOPIC_ID, change="offsets reslot")
    assert (second.version, second.state, second.retired) == (2, FENCING, (("shop", 2),))
    third = replace(second, state=READY).changed_to(transactional_id_prefix="new", writer_slots=None,
                                                    output_topics=first.output_topics, topic_id=TOPIC_ID, change="x")
    assert third.retired == (("shop", 2), ("shop", 4)) and third.named()[-1] == ("new", None)
    back = replace(third, state=READY).changed_to(transactional_id_prefix="shop", writer_slots=2,
                                                  output_topics=first.output_topics, topic_id=TOPIC_ID, change="y")
    assert ("shop", 2) not in back.retired and set(back.retired) == {("shop", 4), ("new", None)}


def test_a_window_carries_the_identity_version_and_the_planned_partition_count():
    window = Window(topic="purchases", group="g", ranges={0: OffsetRange(0, 5), 1: OffsetRange(0, 0)},
                    topic_id=TOPIC_ID, writer_slots=2, identity_version=7, input_partitions=2)
    again = Window.from_json(window.to_json())
    assert again == window
    bound = config().bound_to(again)
    assert (bound.writer_slots, bound.identity_version, bound.planned_partitions) == (2, 7, 2)
    with pytest.raises(ValueError):
        Window.from_dict({**json.loads(window.to_json()), "identity_version": -1})


# -- what a pipeline without a record is recorded as -------------------------------------------------------
G_STATES = ("none", "present")
C_STATES = ("none", "this topic, 4 slots", "this topic, per-partition (an older version)")
LINEAGE = (Lineage.NONE, Lineage.NONE_TRUNCATED, Lineage.FOUND)


def positions_of(g: str, c: str, lineage: Lineage) -> Positions:
    record = {"none": None, "this topic, 4 slots": CheckpointEntry(0, 10, 2, "r", 0, TOPIC_ID, 4),
              "this topic, per-partition (an older version)": CheckpointEntry(0, 10, 2, "r", 0, TOPIC_ID)}[c]
    states = {p: PartitionState(p, TOPIC_ID, 0, 100, 10 if g == "present" else None, record if p == 0 else None,
                                2 if record else 0, lineage=lineage, lineage_offset=9) for p in (0, 1)}
    return Positions(TOPIC_ID, {p: PartitionOffsets(0, 100, 100) for p in states}, states,
                     {p: decide(s) for p, s in states.items()})


@pytest.mark.parametrize(("g", "c", "lineage", "input_created"),
                         list(itertools.product(G_STATES, C_STATES, LINEAGE, (False, True))))
def test_a_pipeline_is_born_new_only_where_nothing_can_have_been_published(g, c, lineage, input_created):
    found = positions_of(g, c, lineage)
    proposed = proposal(config(), TOPIC_ID, found, input_created=input_created)
    untouched = g == "none" and c == "none"
    assert (proposed.born == BORN_NEW) == (untouched and (input_created or lineage is Lineage.NONE))
    if c == "this topic, 4 slots":
        assert proposed.writer_slots == 4  # an older version's grouping is kept
    elif c == "none":
        assert proposed.writer_slots == slots.DEFAULT_WRITER_SLOTS
    else:
        assert proposed.writer_slots is None
    if proposed.born == BORN_NEW:
        assert (proposed.state, proposed.retired) == (READY, ())  # nothing of it ever committed: nothing to fence
    else:  # every legacy id that could have committed (one per partition, the records' grouping) is fenced first
        legacy = {("shop", g_) for g_ in {None, proposed.writer_slots} - {proposed.writer_slots}}
        assert set(proposed.retired) == legacy and proposed.state == (FENCING if legacy else READY)
    assert proposed.version == 0  # proposed, not recorded


def test_a_set_grouping_against_an_older_versions_records_names_the_reslot():
    with pytest.raises(WriterSlotsChangedError, match="offsets reslot --writer-slots 1"):
        proposal(config(1), TOPIC_ID, positions_of("present", "this topic, 4 slots", Lineage.UNREAD))


def test_born_new_on_this_topic_frees_a_partition_whose_outputs_others_truncated():
    state = PartitionState(1, TOPIC_ID, 0, 100, lineage=Lineage.NONE_TRUNCATED)
    assert decide(state).row.name == "unprovable"
    assert recorded().proves_never_published(TOPIC_ID) and not recorded().proves_never_published("other")
    assert not recorded(born=BORN_ADOPTED).proves_never_published(TOPIC_ID)
    assert decide(replace(state, born_new=True)).row.name == "never-committed"
    assert decide(replace(state, born_new=True, lineage=Lineage.FOUND, lineage_offset=5)).row.name == "lineage-found"
