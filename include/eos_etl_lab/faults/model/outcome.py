"""What executing one history of the model soak found: its :class:`Outcome` and its :class:`Violation` s."""

from __future__ import annotations

from dataclasses import dataclass, field

from .registry import Op


@dataclass
class Violation:
    step: int  # 1-based operation, 0: the liveness phase after the history
    kind: str
    detail: str = ""

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step else "liveness"
        return f"{where}: {self.kind}{': ' + self.detail if self.detail else ''}"


@dataclass
class Outcome:
    """What executing one history found."""

    seed: int
    partitions: int
    ops: list[Op]
    violations: list[Violation] = field(default_factory=list)
    records: int = 0
    faults: int = 0
    recovery_s: float | None = None
    seconds: float = 0.0
    error: str = ""  # the history could not be carried out (the harness's failure, not the pipeline's)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.error

    @property
    def first_kind(self) -> str | None:
        return self.violations[0].kind if self.violations else None
