"""ackfold in Airflow, shaped like an Airflow provider:

- `dags`: the DAG factory (`ackfold_dags()`), the one call a DAGs folder needs; its DAGs'
  pages (`dag_docs`), the tracked apps' own DAGs (`app_dags`), what every DAG shares
  (`defaults`) and the manual replay's form (`params`);
- `tasks`: the bodies of the tasks, which call ackfold's runs;
- `spark_jobs`: how a task runs a job on Spark (spark-submit of a packaged entry point,
  its jars resolved when it runs: `spark_submit`; or Spark Connect); `connections`: the
  Airflow connections those use;
- `plugin`: the Reliability UI (the `airflow.plugins` entry point);
- `provider`: the provider's description (the `apache_airflow_provider` entry point).

Airflow imports `plugin` and `provider` in every one of its processes: nothing here
imports Airflow, Spark or the UI's app at import time.
"""
