"""A run's end is visible when it says so: a run returns once a read_committed reader sees what it committed.

``commit_transaction`` returns once the transaction coordinator has decided the commit; the COMMIT
markers that make its records visible to read_committed readers are written to each partition after
that (milliseconds, longer while a partition's leader moves). Until they land, a reader right after
the run (the checker, ``validate``) can see the group's offsets and not yet the outputs. So a run
ends once, in every partition its committed transactions wrote to (outputs and checkpoint records),
the last stable offset is past the last record they wrote there: :func:`wait_visible`.

Those offsets are the producers' delivery reports of committed transactions
(:attr:`~.producer.TransactionalProducer.written`), carried out of the Spark tasks in each
result's ``last_written`` and merged here (:func:`last_written`). An attempt that failed reports
nothing, but what it committed is complete before its retry publishes: the retry's
``init_transactions`` with the same transactional id is answered only once the id's last transaction
is complete, its markers written.

The cost: one ListOffsets request per partition leader for all the partitions, normally answered at
once with everything visible; asked again with a growing pause while not, for at most
:data:`VISIBLE_TIMEOUT_S`, then :class:`~.errors.CommitNotVisibleError` (exit code 1). Asked through a
client made when the run starts (:func:`client`): librdkafka drops its bootstrap connection once the
first metadata names the brokers, and a request made before it connected to a learned broker waits for
its 1 s timer (as :meth:`~.producer.TransactionalProducer._connect` says of ``init_transactions``). A
fresh client took 1.0 to 3.0 s for the request in 3 of 60 tries on one local broker, the others 6 ms;
one made 0.2 s ahead, at most 0.16 s in 40 (1.5 s ahead: 19 ms); on 25 runs of 4,000 purchases, 4 to
57 ms in one round.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from time import monotonic, sleep

from ...kafka.admin import ClusterAdmin
from ...kafka.connection import KafkaConnection
from ...kafka.errors import KafkaSetupError
from ...kafka.retry import Deadline
from ..errors import CommitNotVisibleError

log = logging.getLogger(__name__)

#: The longest a run waits for a read_committed reader to see what it committed.
VISIBLE_TIMEOUT_S = 30.0
#: The first pause before asking again (doubled each time, up to :data:`MAX_PAUSE_S`).
FIRST_PAUSE_S = 0.01
MAX_PAUSE_S = 0.5

#: topic -> partition -> the offset of the last record written there.
Written = dict[str, dict[int, int]]


def last_written(results: Iterable) -> Written:
    """The largest offset per topic partition of the results' ``last_written`` (``[topic, partition, offset]``)."""
    merged: Written = {}
    for result in results:
        for topic, partition, offset in result.last_written:
            parts = merged.setdefault(topic, {})
            if offset > parts.get(partition, -1):
                parts[partition] = offset
    return merged


def client(connection: KafkaConnection, timeout_s: float = VISIBLE_TIMEOUT_S) -> ClusterAdmin:
    """The client :func:`wait_visible` asks, made when the run starts so that it is connected when the run
    ends (see the module's docstring); nothing is asked now."""
    return ClusterAdmin(connection, timeout=min(10.0, timeout_s), retry_deadline_s=timeout_s)


def wait_visible(connection: KafkaConnection, written: Written, *, timeout_s: float = VISIBLE_TIMEOUT_S,
                 admin: ClusterAdmin | None = None) -> float:
    """Return once every partition's last stable offset is past its offset in ``written`` (a read_committed
    reader sees that record and everything before it): the seconds it took. At once with nothing written;
    :class:`~.errors.CommitNotVisibleError` if not within ``timeout_s``."""
    waiting = {t: dict(ps) for t, ps in written.items() if ps}
    if not waiting:
        return 0.0
    t0 = monotonic()
    deadline = Deadline(timeout_s)
    admin = admin or client(connection, timeout_s)
    stable: Written = {}
    pause = FIRST_PAUSE_S
    asked = 0
    while True:
        asked += 1
        try:
            # Retriable failures (a leader moving, a broker lost) are asked again within what is left of the bound.
            stable = admin.last_stable_offsets({t: sorted(ps) for t, ps in waiting.items()},
                                               deadline_s=max(0.1, deadline.remaining()))
        except KafkaSetupError as exc:  # not answered within the bound, or refused
            raise CommitNotVisibleError(_not_visible(waiting, stable, exc, monotonic() - t0)) from exc
        waiting = {t: left for t, ps in waiting.items()
                   if (left := {p: o for p, o in ps.items() if stable[t][p] <= o})}
        if not waiting:
            seconds = monotonic() - t0
            log.info("what the run committed is visible to read_committed readers (%d partitions of %d topics, "
                     "%.3fs, %d list-offsets round%s)", sum(map(len, written.values())), len(written), seconds,
                     asked, "" if asked == 1 else "s")
            return round(seconds, 3)
        if deadline.expired():
            raise CommitNotVisibleError(_not_visible(waiting, stable, None, monotonic() - t0))
        sleep(min(pause, deadline.remaining()))  # the last ask at the bound
        pause = min(2 * pause, MAX_PAUSE_S)


def _not_visible(waiting: Written, stable: Written, cause: KafkaSetupError | None, seconds: float) -> str:
    parts = [f"{t}[{p}] (its last record at {o}, last stable offset {stable.get(t, {}).get(p, 'not read')})"
             for t, ps in sorted(waiting.items()) for p, o in sorted(ps.items())]
    shown = ", ".join(parts[:5]) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")
    return (f"the run committed its transactions, but after {seconds:.1f}s a read_committed reader still does not "
            f"see all it wrote in {shown}{f' ({cause})' if cause is not None else ''}: their commit markers are "
            "not written yet (a partition leader moving, brokers down). Nothing is lost or published twice; run "
            "the window again: it publishes nothing twice, and its producers' init_transactions completes the "
            "transactions first")
