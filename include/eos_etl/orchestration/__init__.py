"""Airflow integration: connections, operators, assets and alerts for the shop DAGs (their run
reports and the web app serving them: :mod:`eos_etl.reports`).

Imports Airflow lazily where it can, so DAG files stay cheap to parse.
"""
