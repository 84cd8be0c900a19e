"""Fault injection: kill, pause and starve real job and broker processes, then judge.

``process`` runs the job as a killable process group, ``lab`` owns the broker,
fresh topics and the verdict, ``scenarios`` are the faults, ``soak`` runs them
at scale and writes ``docs/reliability.md``.
"""

from .broker_scenarios import STEP_POINTS, kill_at_step
from .lab import Lab, TrialResult

__all__ = ["Lab", "STEP_POINTS", "TrialResult", "kill_at_step"]
