"""The command line's parser, broker-free: every command is there with its handler and its help, and a
bad argument or a refused combination ends in one ``error:`` line with exit code 2 before anything runs.

The commands against real components are in tests/integration/cli/test_cli.py and the tests that import
``cli`` from tests/support/cli.py.
"""

from __future__ import annotations

import argparse

import pytest

from eos_etl import cli
from eos_etl_lab import cli as lab_cli

COMMANDS = {
    "fetch-jars", "jvm-archive", "broker", "airflow", "up", "down", "status", "cluster", "spark-connect",
    "create-topics", "generate", "plan-window", "run-window", "offsets", "check", "transactions", "demo",
    "acl", "scram-user",
}
#: The lab's own command line (python -m eos_etl_lab): never a verb of the product's.
LAB_COMMANDS = {"soak", "bench"}


def _commands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    parser = parser or cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_every_command_is_registered_once_with_a_handler():
    commands = _commands()
    assert set(commands) == COMMANDS
    for name, parser in commands.items():
        handler = parser.get_default("func")
        assert callable(handler), name
        # The handler sits in the subject module that registered the command's parser.
        assert handler.__module__.startswith("eos_etl.cli."), (name, handler.__module__)


def test_the_lab_has_a_command_line_of_its_own():
    assert set(_commands(lab_cli.build_parser())) == LAB_COMMANDS
    assert not LAB_COMMANDS & set(_commands())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_prints_its_help_and_exits_0(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: eos-etl {command} [-h]"), out[:200]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err[-2000:]
    return errors[0]


@pytest.mark.parametrize("argv, says", [
    (["broker", "frobnicate"], "eos-etl broker: argument action: invalid choice: 'frobnicate'"),
    (["nosuch"], "eos-etl: argument command: invalid choice: 'nosuch'"),
    (["run-window", "--chunk-records", "0"], "--chunk-records must be a positive integer, not 0"),
    (["acl", "grant", "--principal", "x"], "the following arguments are required: --role"),
])
def test_a_bad_argument_is_one_error_line_and_exit_2(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert says in _one_error(capsys)


def test_a_refused_combination_is_one_error_line_and_exit_2_before_anything_runs(capsys):
    assert lab_cli.main(["soak", "--cluster", "--partitions"]) == 2
    assert _one_error(capsys) == "error: soak: --cluster and --partitions are two soaks; run one, then the other"


def test_the_labs_commands_log_the_labs_own_info_lines(monkeypatch, capfd):
    """A soak's progress lines (the lab's loggers at INFO) reach its stderr as the product's do."""
    import logging

    def handler(args) -> int:
        logging.getLogger("eos_etl_lab.faults.probe").info("client kills: 25 of 300")
        return 0

    parser = lab_cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub.add_parser("probe").set_defaults(func=handler)
    monkeypatch.setattr(lab_cli, "build_parser", lambda: parser)
    lab_logger = logging.getLogger("eos_etl_lab")

    def drop_handlers() -> None:  # another test's, bound to its own captured stderr
        for h in [h for h in lab_logger.handlers if getattr(h, "_eos_etl", False)]:
            lab_logger.removeHandler(h)

    drop_handlers()
    try:
        assert lab_cli.main(["--log-level", "INFO", "probe"]) == 0
    finally:
        drop_handlers()
        lab_logger.propagate = True
    err = capfd.readouterr().err
    assert "INFO eos_etl_lab.faults.probe" in err and "client kills: 25 of 300" in err
