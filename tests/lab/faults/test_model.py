"""The randomized operation soak (``make soak-model``), short: a few seeded histories on the session broker.

The full soak draws longer histories, on a private broker it also restarts and pauses, and shrinks
failing histories; here two seeds of a few operations each (no broker faults: the session broker
is shared), every step judged by the independent checker and the exit-code contract, then
liveness. A failure prints the seed and the numbered history that reproduces it
(``python -m eos_etl_lab soak --model --seed-list SEED --length N`` re-runs and shrinks it).
"""

from __future__ import annotations

import random

import pytest

from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import model as ms
from eos_etl_lab.faults.model import Op


def test_histories_are_reproducible_from_their_seed():
    assert ms.draw_history(7, 10) == ms.draw_history(7, 10)
    assert ms.draw_history(7, 10) != ms.draw_history(8, 10)
    _, ops = ms.draw_history(7, 10, broker_ops=False)
    assert ops[0].kind == "produce" and not {o.kind for o in ops} & set(ms.BROKER_OPS)
    assert any(o.kind in ms.RUN_OPS for o in ops)
    # Without a Connect server nothing is drawn for it; with one, every run op has its route.
    assert not any(o.kind in ms.CONNECT_OPS or "route" in o.a for o in ops)
    _, ops = ms.draw_history(7, 40, connect=True)
    runs = [o for o in ops if o.kind in ms.RUN_OPS and o.kind not in ms.CONNECT_OPS]
    assert runs and all(o.a["route"] in ms.ROUTES for o in runs)
    assert {o.a["route"] for o in runs} == set(ms.ROUTES)


def test_recovery_command_is_read_from_the_error_line():
    line = ("error: purchases[1]: group g has no committed offset ...; recover the position with "
            "`python -m eos_etl offsets restore --from-lineage --input-topic purchases --group g (and this run's "
            "connection and topic options)`, then run again")
    assert ms.parse_recovery_command(line) == ["offsets", "restore", "--from-lineage", "--input-topic", "purchases",
                                               "--group", "g"]
    assert ms.parse_recovery_command("error: bad `--window-json` value") is None
    grow = ("error: checkpoint topic 'g.checkpoints' has 1 partitions, 'p' 2: give it one per input partition "
            "(kafka-topics --alter --topic g.checkpoints --partitions 2)")
    assert ms.parse_recovery_command(grow) == ["kafka-topics", "g.checkpoints", "2"]
    grow = ("error: checkpoint topic 'g.checkpoints' has 1 partitions, 'p' 2 (partitions were added to it): give it "
            "one per input partition with `python -m eos_etl create-topics --allow-existing (and this run's "
            "connection and topic options)`, which grows it (or kafka-topics --alter --topic g.checkpoints "
            "--partitions 2), then run again")
    assert ms.parse_recovery_command(grow) == ["create-topics", "--allow-existing"]


def test_shrinking_keeps_the_smallest_history_that_still_fails(monkeypatch):
    """ddmin over the operations: a failure that needs a produce and one crash shrinks to those two."""
    rng = random.Random(3)
    ops = [ms.draw_op(rng, k) for k in ("produce", "run", "delete_group", "produce", "add_partitions", "run")]
    culprit = Op("crash", (("point", "before_commit"),))
    ops.insert(4, culprit)
    runs = []

    def fake_execute(_lab, seed, partitions, candidate):
        runs.append(candidate)
        out = ms.Outcome(seed, partitions, list(candidate))
        if culprit in candidate and any(o.kind == "produce" for o in candidate):
            out.violations.append(ms.Violation(1, "lost"))
        return out

    monkeypatch.setattr(ms, "execute", fake_execute)
    failing = ms.Outcome(1, 2, ops, violations=[ms.Violation(5, "lost")])
    shortest = ms.shrink(None, failing, budget=40)
    assert [o.kind for o in shortest.ops] == ["produce", "crash"]
    assert len(runs) <= 40


def test_shrinking_cuts_after_the_failing_step_first_and_tries_a_racy_candidate_again(monkeypatch):
    """The operations after the step that failed go first; a candidate that passed once is executed
    again (a kill lands differently each time) before it counts as not failing."""
    rng = random.Random(5)
    culprit = Op("signal", (("sig", "KILL"), ("at", "publishing"), ("delay", 0.5)))
    ops = [ms.draw_op(rng, "produce"), ms.draw_op(rng, "run"), culprit, ms.draw_op(rng, "produce"),
           ms.draw_op(rng, "run"), Op("delete_group")]
    runs = []

    def racy_execute(_lab, seed, partitions, candidate):
        runs.append(candidate)
        out = ms.Outcome(seed, partitions, list(candidate))
        tries_of_this = sum(r == candidate for r in runs)
        if culprit in candidate and tries_of_this % 2 == 0:  # fails on every second execution only
            out.violations.append(ms.Violation(candidate.index(culprit) + 1, "lost"))
        return out

    monkeypatch.setattr(ms, "execute", racy_execute)
    failing = ms.Outcome(1, 2, ops, violations=[ms.Violation(3, "lost")])
    shortest = ms.shrink(None, failing, budget=40, repeats=2)
    assert runs[0] == runs[1] == ops[:3]  # cut after step 3, executed twice before it failed
    assert shortest.ops == [culprit]
    assert ms.shrink(None, failing, budget=40, repeats=1).ops != [culprit]  # one try each misses it


def test_the_page_counts_routes_and_is_plain_markdown(tmp_path):
    """The model section of docs/reliability.md (rendered autoescaped): no HTML entity in its prose,
    the operations counted by kind and the windows by route."""
    partitions, ops = ms.draw_history(3, 10, connect=True)
    outcome = ms.Outcome(3, partitions, ops, records=10, faults=2, recovery_s=1.0, seconds=5)
    page = tmp_path / "reliability.md"
    page.write_text("# Reliability\n")
    ms.write_markdown([(outcome, None)], 60.0, ms.ModelSoakOptions(seeds=(3,), length=10, connect=True), "cmd", page)
    text = page.read_text()
    assert "&#" not in text and "&amp;" not in text
    runs = [o for o in ops if "route" in o.a or o.kind in ms.CONNECT_OPS]
    local = sum(o.a.get("route") == "local" for o in runs)
    assert f"by route: connect {len(runs) - local}, local {local}." in text


def _op(kind: str, **args) -> Op:
    return Op(kind, tuple(args.items()))


#: Produces (committed, invalid, in transactions), a run, input records deleted past the pipeline's position,
#: and a run to be SIGKILLed as it publishes: it must stop first, with exit 2 naming the partition, and
#: liveness runs the reset it names (seed 29's history as the generator drew it before the position ops).
#: The longer histories, kills and crashes are make soak-model's.
TRUNCATED_PAST_THE_POSITION = (1, [
    _op("produce", count=200, invalid=0.1, aborted=0.0, txn=50, seed=412001), _op("run"),
    _op("truncate_input", beyond=True, share=0.56), _op("produce", count=200, invalid=0.0, aborted=0.0, txn=50,
                                                        seed=962020),
    _op("signal", sig="KILL", at="publishing", delay=1.34)])
#: The position table's operations: an idle tick through the DAG's plan path, a second pipeline on the
#: shared outputs, the checkpoint topic and the group deleted, everything aged out (retention), an idle
#: tick then the input re-created. The run after must stop (nothing proves a first run of the new
#: topic), liveness runs the reset it names, and the new topic's purchases are published exactly once.
POSITION_OPS = (2, [
    _op("produce", count=200, invalid=0.1, aborted=0.0, txn=50, seed=531), _op("run"), _op("idle_tick"),
    _op("second_pipeline"), _op("delete_checkpoint_topic"), _op("delete_group"), _op("age_out"),
    _op("tick_then_recreate"), _op("produce", count=100, invalid=0.0, aborted=0.0, txn=None, seed=532)])


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("history", [TRUNCATED_PAST_THE_POSITION, POSITION_OPS],
                         ids=["truncated past the position", "position table operations"])
def test_a_history_keeps_the_contract(kafka_broker, connection, history):
    lab = Lab(connection)  # no broker faults on the session broker
    partitions, ops = history
    outcome = ms.execute(lab, 29, partitions, ops)
    assert outcome.ok, ms.report_history(outcome, None)
    assert outcome.recovery_s is not None
    if history is POSITION_OPS:  # the run after stopped, and liveness ran the reset its line named
        assert any(n.startswith("ran `offsets reset --to earliest") for n in outcome.notes), outcome.notes


def test_every_operation_kind_is_drawn_and_dispatched():
    """The generator draws every kind over enough seeds, and each kind has its operation."""
    drawn = {op.kind for seed in range(200) for op in ms.draw_history(seed, 10, connect=True)[1]}
    assert drawn == set(ms.WEIGHTS)
    assert all(callable(getattr(ms.History, f"op_{kind}", None)) for kind in ms.WEIGHTS)
