"""Run reports: what each DAG run did, and the web app that shows them behind Airflow's login.

* :mod:`.verdict` - the one place that decides a run passed, failed or did nothing;
* :mod:`.store` - the report as data, and its files under ``var/reports`` (written by the
  DAG's ``report`` task, read by the app);
* :mod:`.pages` - the HTML pages, rendered from the Jinja2 templates in ``include/web/templates``
  (autoescaped);
* :mod:`.backfills` - what each backfill did, interval by interval;
* :mod:`.data_docs` - Great Expectations' Data Docs, served offline and scoped per DAG;
* :mod:`.app` - the FastAPI app that ``plugins/eos_etl_reports.py`` mounts in Airflow's API server.

Nothing here imports Airflow or the DAG code: the DAGs import this package, never the reverse.
"""
