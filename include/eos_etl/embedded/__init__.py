"""The embedded stack: the launchers of what ``make demo``, ``make up`` and the tests start on one machine
(a Kafka node or a three-node cluster, a Spark standalone cluster, a Spark Connect server, Airflow
standalone under supervisord) with their TLS material and SQLite settings.

It stands on the runtime packages (``kafka``, ``spark``, ``jvm``, ``jars``, ``host``); none of them
imports it. The DAGs' operators reach it only to supervise the project's own Connect server when
``EOS_ETL_SPARK_CONNECT_HOME`` names one; compose runs its own containers instead."""
