"""Is a Spark Connect server answering? One probe, and a bounded wait for an answer.

Asked by the project's supervisor before a window (:mod:`.spark_connect`), by a
window's own watch while it runs (:mod:`.connect_client`) and by the run task
for a server it does not supervise (compose's).
"""

from __future__ import annotations

import time
import uuid

# How long one probe may take (a trivial AnalyzePlan: served by gRPC threads, never queued behind a
# job), and how long a server may answer none before it counts as stuck: longer than any
# garbage-collection pause of its 1g heap, short enough that a window notices within a minute.
PROBE_TIMEOUT_S = 5.0
STALL_BOUND_S = 30.0
#: The user every session of the project's clients and probes belongs to (a session is theirs by user
#: and id: a probe naming a window's session id asks in that very session).
USER_ID = "eos-etl"
# A probe whose address names no session asks in this one (one per process, not one per probe).
_PROBE_SESSION = str(uuid.uuid4())


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Ask the Spark Connect server at ``url`` (``sc://``, with its token) for its Spark version on a
    connection of its own, within ``timeout_s``: None when it answered, else the gRPC status."""
    # pyspark's Connect client and grpc load on first use: the server's own commands need neither.
    import grpc
    from pyspark.sql.connect import proto
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from pyspark.sql.connect.proto import base_pb2_grpc

    builder = DefaultChannelBuilder(url)
    channel = builder.toChannel()
    try:
        request = proto.AnalyzePlanRequest(session_id=builder.session_id or _PROBE_SESSION,
                                           client_type="eos-etl-probe")
        request.user_context.user_id = USER_ID
        request.spark_version.SetInParent()
        base_pb2_grpc.SparkConnectServiceStub(channel).AnalyzePlan(request, timeout=timeout_s,
                                                                   metadata=builder.metadata())
        return None
    except grpc.RpcError as exc:
        details = (exc.details() or "").strip().splitlines()
        return f"{exc.code().name}: {details[0][:200]}" if details else exc.code().name
    finally:
        channel.close()


def wait_answering(remote: str, bound_s: float = STALL_BOUND_S) -> str | None:
    """None once the server at ``remote`` answers a probe (within ``bound_s``); else the last reason."""
    deadline = time.monotonic() + bound_s
    while True:
        reason = probe(remote, min(5.0, max(0.5, deadline - time.monotonic())))
        if reason is None or time.monotonic() >= deadline:
            return reason
        time.sleep(1.0)
