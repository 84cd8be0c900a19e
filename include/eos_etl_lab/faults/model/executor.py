"""The model soak's history executor: a history's operations carried out in order and judged.

:func:`execute` runs a history on fresh topics of a lab: each operation through its registered
implementation (:data:`~.operations.OPERATIONS`), the faults healed after each step and safety
checked before the next (:meth:`~.harness.Harness.check`); then liveness: once the faults healed,
at most :data:`RETRIES` runs (each exit 2's named command run first) must bring the committed
offsets level with the input's end, and the checker must be exact. A history the harness could not
carry out is reported so (:attr:`~.outcome.Outcome.error`), never as a pass.
"""

from __future__ import annotations

import logging
import time

from eos_etl.checker import check_shop

from ..lab import Lab
from .operations import OPERATIONS, Operations
from .outcome import Outcome
from .registry import Op

log = logging.getLogger(__name__)

#: Runs (after the faults healed) that must bring the pipeline level with its input.
RETRIES = 4


class History(Operations):
    """One history executed against fresh topics of ``lab`` (its state and the model of it)."""

    def heal(self) -> None:
        if self.lab.connect is not None and not self.lab.connect.is_running():
            self.lab.connect.start()
        broker = self.lab.broker
        if broker is not None:
            for node in broker.nodes:
                if node.is_paused():
                    node.resume()
            if not broker.is_running():
                broker.start()

    def cleared_by(self, command: list[str]) -> None:
        """What the operator's ``command`` leaves behind: a reset moves the positions of a replaced or
        truncated input (the next run must then be exact); growing the checkpoint topic, its partitions.
        Anything else still owed makes the next run stop again, as it must."""
        if command[:2] in (["offsets", "reset"], ["offsets", "restore"]):
            self.memory_lost = False
        if command[:2] == ["offsets", "reset"]:
            self.replaced = False
            self.truncated.clear()
        elif command[:1] in (["create-topics"], ["kafka-topics"]):
            self.grown = False

    def liveness(self) -> None:
        """After the faults healed: at most RETRIES runs (and the commands exit 2 named) bring the
        committed offsets level with the input's end, and the checker is exact."""
        self.step = 0
        t0 = time.monotonic()
        for attempt in range(RETRIES):
            job = self.run_job()
            code = self.finish(job)
            self.judge_run(job, code, what=f"liveness run {attempt + 1}")
            ends = self.lab.input_ends(self.shop)
            if code == 0 and self.committed() == ends:
                self.out.recovery_s = round(time.monotonic() - t0, 1)
                self.follow_hand_reset()
                report = check_shop(self.shop, expected_ends=ends, outputs_from=self.outputs_from)
                for kind, n in report.violations.items():
                    self.violate(kind, f"x{n} after the pipeline caught up: {report.to_dict()['partitions']}"[:400])
                return
            if code == 2 and not self.run_recovery():
                return
        self.violate("not_level", f"{RETRIES} runs after the faults healed: committed {self.committed()}, input "
                     f"ends {self.lab.input_ends(self.shop)}")

    def run_recovery(self) -> bool:
        """Carry out the command the last exit 2 named, as the operator would; False (a violation) when
        it named none or the command failed."""
        if self.recovery is None:
            self.violate("not_level", "exit 2 named no command to recover with")
            return False
        if self.recovery[0] == "kafka-topics":  # kafka-topics --alter --topic T --partitions N
            topic, n = self.recovery[1], int(self.recovery[2])
            self.add_partitions(topic, n)
            self.out.notes.append(f"grew {topic} to {n} partitions")
        else:
            fix = self.cli(self.recovery)
            fix_code = self.finish(fix, 120)
            if fix_code != 0:
                self.violate("recovery_command_failed", f"`{' '.join(self.recovery)}` exit {fix_code}: "
                             f"{fix.tail(2)!r}")
                return False
            self.out.notes.append(f"ran `{' '.join(self.recovery)}`")
        self.cleared_by(self.recovery)
        self.recovery = None
        return True

    def execute(self) -> Outcome:
        t0 = time.monotonic()
        try:
            for i, op in enumerate(self.ops, 1):
                self.step = i
                log.info("seed %s step %d/%d: %s", self.seed, i, len(self.ops), op.describe())
                OPERATIONS[op.kind].run(self, **op.a)
                self.heal()
                self.check()
            self.heal()
            self.liveness()
        except Exception as exc:  # noqa: BLE001 - reported as a history not carried out, never a pass
            log.exception("seed %s: history could not be carried out", self.seed)
            self.out.error = f"step {self.step}: {type(exc).__name__}: {exc}"[:500]
            try:
                self.heal()
            except Exception:  # noqa: BLE001 - the next history heals again; this one is reported already
                log.exception("seed %s: healing after the history failed", self.seed)
        self.out.seconds = round(time.monotonic() - t0, 1)
        return self.out


def execute(lab: Lab, seed: int, partitions: int, ops: list[Op]) -> Outcome:
    """Run ``ops`` on fresh topics, group and transactional ids of ``lab`` and judge them."""
    return History(lab, seed, partitions, ops).execute()
