"""eos_etl: exactly-once batch ETL from Kafka to Kafka with PySpark.

Packages: ``engine`` (generic exactly-once windows, publisher, checkpoint),
``kafka`` (connections and admin queries), ``shop`` (the purchases domain),
``stack`` (local broker, Spark connector, Airflow standalone).
"""

__version__ = "0.1.0"
