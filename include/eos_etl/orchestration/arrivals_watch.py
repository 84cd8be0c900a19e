"""The watched purchases Asset of the on-arrival DAG, and the trigger that watches it.

The DAG file builds the Asset when it is parsed, every 30 s, so building it reads nothing: no
Variable (the purchases topic), no Connection (the watcher's consumer config), and no Kafka client
is imported. :class:`PurchasesArrivalTrigger` carries only names (the Variable's, the
Connection's) and looks the topic up when the triggerer runs it; it then runs the Kafka
provider's ``AwaitMessageTrigger`` on that topic with :func:`arrivals.first_of_burst` as its
apply function. The triggerer starts the trigger again after each event, so a changed topic in
the Variable is picked up at the next burst.

Airflow runs an Asset's watchers only while a DAG that schedules on it is unpaused, so the DAG
can be defined before its connection exists; a trigger started without it fails in the
triggerer's log, naming the connection.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetWatcher
from airflow.triggers.base import BaseEventTrigger

from . import arrivals
from .settings import SHOP_VARIABLE, ShopDagConfig

ASSET_NAME = "shop_invoicing.purchases_arrivals"


class PurchasesArrivalTrigger(BaseEventTrigger):
    """Fires once per burst of purchases; the topic is read from the pipeline Variable at run time."""

    def __init__(self, *, variable: str = SHOP_VARIABLE, kafka_config_id: str = arrivals.WATCH_CONN_ID,
                 quiet_s: float = arrivals.QUIET_S, max_batch_s: float = arrivals.MAX_BATCH_S) -> None:
        super().__init__()
        self.variable = variable
        self.kafka_config_id = kafka_config_id
        self.quiet_s = quiet_s
        self.max_batch_s = max_batch_s
        self._watch = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.{type(self).__qualname__}",
                {"variable": self.variable, "kafka_config_id": self.kafka_config_id,
                 "quiet_s": self.quiet_s, "max_batch_s": self.max_batch_s})

    async def run(self):
        # Deferred: the provider's trigger imports confluent_kafka, which the DAG parse must not load.
        from airflow.providers.apache.kafka.triggers.await_message import AwaitMessageTrigger
        from asgiref.sync import sync_to_async

        config = await sync_to_async(ShopDagConfig.load)(self.variable)
        self._watch = AwaitMessageTrigger(
            topics=[config.topics.purchases], kafka_config_id=self.kafka_config_id,
            apply_function=f"{arrivals.__name__}.first_of_burst",
            apply_function_kwargs={"quiet_s": self.quiet_s, "max_batch_s": self.max_batch_s},
            # The provider sleeps poll_interval after each message that does not fire: a burst's
            # tail must be read through quickly, not at one message per interval.
            poll_interval=0, poll_timeout=1,
        )
        async for event in self._watch.run():
            yield event

    async def cleanup(self) -> None:
        if self._watch is not None:
            await self._watch.cleanup()


def arrivals_asset(*, quiet_s: float = arrivals.QUIET_S, max_batch_s: float = arrivals.MAX_BATCH_S) -> Asset:
    """The Asset the on-arrival DAG schedules on, watched by :class:`PurchasesArrivalTrigger`."""
    trigger = PurchasesArrivalTrigger(quiet_s=quiet_s, max_batch_s=max_batch_s)
    return Asset(name=ASSET_NAME, watchers=[AssetWatcher(name="purchases_arrivals", trigger=trigger)])
