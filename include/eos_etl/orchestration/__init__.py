"""Airflow integration: connections, operators and reports for the shop DAGs.

Imports Airflow lazily where it can, so DAG files stay cheap to parse.
"""
