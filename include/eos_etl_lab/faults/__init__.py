"""Fault injection: kill, pause and starve real job and broker processes, then judge.

``job_process`` runs the job as a killable process group, ``lab`` owns the broker,
fresh topics and the verdict, ``trial`` is the skeleton every fault trial follows,
the ``*_scenarios`` modules are the faults, ``soak`` runs them at scale and writes
``docs/reliability.md``; ``model`` is the randomized operation soak.
"""

from .broker_scenarios import STEP_POINTS, kill_at_step
from .lab import Lab, TrialResult

__all__ = ["Lab", "STEP_POINTS", "TrialResult", "kill_at_step"]
