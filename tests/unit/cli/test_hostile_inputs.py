"""Random and hostile inputs (hypothesis), broker-free: identifiers, numbers and times, window JSON of
any shape, attempt run ids and the DAGs' params are a value or one clear error.

The CLI with hostile flags, window JSON and connection files against the real broker (one ``error:``
line, exit code 2, nothing written, no offset moved): tests/integration/cli/test_hostile_inputs.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eos_etl import arguments
from eos_etl.engine.window import Window
from tests.support.hostile_inputs import HOSTILE_TEXT


# -- the checkers themselves (broker-free): a value or a ValueError, nothing else ------------------
@settings(max_examples=300)
@given(st.one_of(st.text(max_size=300), HOSTILE_TEXT))
def test_identifier_accepts_only_safe_ids(text):
    try:
        value = arguments.identifier(text, "id")
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert value == text and re.fullmatch(r"[A-Za-z0-9._-]{1,249}", text) and ".." not in text


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=40), st.integers().map(str), st.floats().map(repr), HOSTILE_TEXT))
def test_numbers_and_times_are_a_value_or_one_clear_error(text):
    for check in (arguments.positive_int, arguments.positive_float, arguments.timestamp_ms):
        try:
            value = check(text, "x")
        except ValueError as exc:
            assert "\n" not in str(exc)
            continue
        if check is not arguments.timestamp_ms:
            assert value > 0


@settings(max_examples=300)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner,
                                                                                max_size=3), max_leaves=12))
def test_window_json_of_any_shape_is_a_window_or_a_value_error(value):
    try:
        Window.from_json(json.dumps(value))
    except (ValueError, KeyError, TypeError):
        pass


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=300), HOSTILE_TEXT), st.integers(min_value=1, max_value=99))
def test_attempt_run_ids_are_acceptable_and_unique_per_attempt(run_id, attempt):
    ids = {arguments.attempt_run_id(run_id, a) for a in (attempt, attempt + 1)}
    assert len(ids) == 2 and all(arguments.identifier(i) == i for i in ids)


# -- the DAGs' Params, validated by Airflow itself (in a subprocess: Airflow is never imported here) --
PARAM_CHECK = """
import json, sys
from eos_etl.orchestration.dag_factory import _common_params, _replay_params
params = {**_common_params(), **_replay_params()}
out = []
for name, value in json.load(sys.stdin):
    try:
        params[name].resolve(value)
        out.append("accepted")
    except Exception as exc:  # the outcome is reported, the test judges it
        out.append(type(exc).__name__)
print(json.dumps(out))
"""


def test_hostile_dag_params_are_refused(tmp_path):
    values: list[tuple[str, object]] = []
    bad_counts = st.one_of(st.integers(max_value=0), st.text(max_size=10), st.floats(), st.booleans(),
                           st.lists(st.integers(), max_size=2))
    bad_until = st.one_of(st.datetimes().map(lambda d: d.isoformat()), st.text(max_size=30), st.integers(),
                          HOSTILE_TEXT)
    bad_version = st.one_of(st.text(max_size=12).filter(lambda t: not re.fullmatch(r"v[0-9]{1,4}", t)), st.integers())

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(st.tuples(st.sampled_from(["max_records_per_partition", "chunk_records"]), bad_counts),
                     st.tuples(st.just("until"), bad_until), st.tuples(st.just("version"), bad_version)))
    def collect(pair):
        values.append(pair)

    collect()
    proc = subprocess.run([sys.executable, "-c", PARAM_CHECK], input=json.dumps(values), capture_output=True,
                          text=True, timeout=120, env={**os.environ, "AIRFLOW_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    for (name, value), outcome in zip(values, outcomes, strict=True):
        if outcome == "accepted" and name == "until":
            # Only a well-formed time the form cannot judge (a 13th month, say) gets through the
            # schema; the plan task parses it with the CLI's checker, which refuses it in one line.
            assert isinstance(value, str), value
            with pytest.raises(ValueError):
                arguments.timestamp_ms(value, "until")
        elif outcome == "accepted":
            # JSON schema's "integer" admits integral floats (5.0), >= 1 here: the task takes them as ints.
            assert name != "version" and isinstance(value, float) and value.is_integer() and value >= 1, value
        else:
            assert outcome == "ParamValidationError", (name, value, outcome)
    assert len(values) >= 200
