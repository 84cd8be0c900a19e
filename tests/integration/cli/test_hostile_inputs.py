"""Random and hostile arguments (hypothesis): one ``error:`` line, exit code 2, no traceback,
nothing written to Kafka and no offset moved. The CLI runs in-process against the real broker.

The parsers alone (identifiers, numbers, window JSON, the DAGs' params): tests/unit/cli/test_hostile_inputs.py."""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eos_etl import cli
from eos_etl.shop.generator import generate
from tests.support.cli import assert_untouched, shop_args
from tests.support.hostile_inputs import HOSTILE_TEXT

ID_CHARS = string.ascii_letters + string.digits + "._-"


def bad_ids():
    """Text that is no acceptable id: a character outside [A-Za-z0-9._-], '..', empty, or too long."""
    foreign = st.text(min_size=1, max_size=30).filter(lambda t: any(c not in ID_CHARS for c in t))
    dotted = st.tuples(st.text(ID_CHARS, max_size=10),
                       st.text(ID_CHARS, max_size=10)).map(lambda ab: f"{ab[0]}..{ab[1]}")
    return st.one_of(foreign, dotted, st.just(""), st.just("."), st.text(ID_CHARS, min_size=250, max_size=300),
                     HOSTILE_TEXT.filter(lambda t: not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t) or ".." in t))


def bad_positive_ints():
    return st.one_of(st.integers(max_value=0).map(str), st.floats(allow_nan=True).map(repr),
                     # isdecimal, not isdigit: '²' is a digit int() refuses (hypothesis found it)
                     st.text(max_size=20).filter(lambda t: not t.strip().isdecimal() or int(t.strip()) < 1))


def bad_times():
    naive = st.datetimes().map(lambda d: d.isoformat())  # no timezone
    return st.one_of(naive, st.text(max_size=40).filter(lambda t: not t.strip().isdigit()))


# -- the CLI against the real broker ---------------------------------------------------------------
def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's errors, raised by the CLI's parser as exit code 2
        code = exc.code
    return code, capsys.readouterr().err


def assert_one_error(code, err: str) -> None:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, (code, err[-2000:])


FLAG_VALUES = {
    "--group": bad_ids(), "--input-topic": bad_ids(), "--invoices-topic": bad_ids(),
    "--transactional-id-prefix": bad_ids(), "--run-id": bad_ids(),
    "--max-records-per-partition": bad_positive_ints(), "--max-payload-bytes": bad_positive_ints(),
    "--chunk-records": bad_positive_ints(), "--transaction-timeout-ms": bad_positive_ints(),
    "--chunk-seconds": st.one_of(st.floats(max_value=0).map(repr), st.just("nan"), st.just("inf"),
                                 st.text(max_size=10).filter(lambda t: not re.fullmatch(r"\s*[0-9.eE+-]+\s*", t))),
    "--until": bad_times(),
    "--sasl-password-file": st.text(ID_CHARS, min_size=1, max_size=20).map(lambda t: f"/nonexistent/{t}"),
    "--connection-json-file": st.text(ID_CHARS, min_size=1, max_size=20).map(lambda t: f"/nonexistent/{t}"),
}


@pytest.fixture
def quiet_shop(shop_factory):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 20, seed=8)
    return shop


def shop_argv(shop) -> list[str]:
    return ["--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop)]


def test_hostile_flags_fail_in_one_line_and_touch_nothing(quiet_shop, admin, capsys):
    tried = []

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(FLAG_VALUES)).flatmap(lambda f: st.tuples(st.just(f), FLAG_VALUES[f])))
    def one(flag_value):
        flag, value = flag_value
        tried.append(flag_value)
        # "--flag=value": a value starting with "-" stays a value, as an operator's typo would.
        code, err = run_cli(["run-window", *shop_argv(quiet_shop), f"{flag}={value}"], capsys)
        assert_one_error(code, err)
        assert flag in err

    one()
    assert len(tried) >= 200
    assert_untouched(quiet_shop, admin)


def test_hostile_window_json_fails_in_one_line_and_touches_nothing(quiet_shop, admin, capsys):
    t = quiet_shop.topics
    ends = {p: o.last_stable for p, o in admin.settled_offsets(t.purchases, [0, 1]).items()}
    good = {"topic": t.purchases, "group": quiet_shop.group, "partitions": {str(p): [0, e] for p, e in ends.items()}}
    wrong = st.one_of(
        st.text(max_size=50),
        st.builds(lambda topic: {**good, "topic": topic}, st.text(ID_CHARS, min_size=1, max_size=20)
                  .filter(lambda x: x != t.purchases)),
        st.builds(lambda group: {**good, "group": group}, st.text(ID_CHARS, min_size=1, max_size=20)
                  .filter(lambda x: x != quiet_shop.group)),
        st.builds(lambda extra: {**good, "partitions": {"0": [0, ends[0] + extra], "1": [0, ends[1]]}},
                  st.integers(min_value=1, max_value=10**12)),
        st.builds(lambda p: {**good, "partitions": {str(p): [0, 1]}}, st.integers(min_value=2, max_value=10**6)),
        st.builds(lambda se: {**good, "partitions": {"0": se}},
                  st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=3)
                  .filter(lambda se: not (len(se) == 2 and all(type(o) is int for o in se)
                                          and 0 <= se[0] <= se[1] <= ends[0]))),  # not a real (sub)range
    )
    tried = []

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(wrong)
    def one(window):
        text = window if isinstance(window, str) else json.dumps(window)
        tried.append(text)
        code, err = run_cli(["run-window", *shop_argv(quiet_shop), "--window-json", text], capsys)
        assert_one_error(code, err)

    one()
    assert len(tried) >= 100
    assert_untouched(quiet_shop, admin)


SECRET = "hunter2-do-not-echo"


def test_hostile_connection_files_fail_in_one_line_never_echoing_them(quiet_shop, admin, capsys, tmp_path):
    """A connection file (a mounted secret) that is no connection: refused without its content in the error."""
    complete = {"bootstrap_servers": quiet_shop.connection.bootstrap_servers}
    wrong = st.one_of(
        st.text(max_size=60).map(lambda t: t + SECRET),
        st.lists(st.text(max_size=5), max_size=3).map(lambda v: json.dumps([SECRET, *v])),
        st.dictionaries(st.text(max_size=8).filter(lambda k: k not in complete), st.just(SECRET), min_size=1,
                        max_size=3).map(lambda d: json.dumps({**complete, **d})),
        st.sampled_from(["SASL_SSL", "SASL_PLAINTEXT"]).map(lambda p: json.dumps(
            {**complete, "security_protocol": p, "sasl_password": SECRET})),  # no user, no mechanism
        st.one_of(st.integers(), st.lists(st.none(), max_size=2)).map(lambda v: json.dumps(
            {**complete, "sasl_username": v, "sasl_password": SECRET})),
        st.just(json.dumps({"sasl_password": SECRET})),
    )
    secret_file = tmp_path / "connection.json"
    tried = []

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(wrong)
    def one(text):
        tried.append(text)
        secret_file.write_text(text)
        code, err = run_cli(["run-window", *shop_args(quiet_shop), "--connection-json-file", str(secret_file)],
                            capsys)
        assert_one_error(code, err)
        assert SECRET not in err

    one()
    assert len(tried) >= 80
    assert_untouched(quiet_shop, admin)
