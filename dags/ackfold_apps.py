"""ackfold_app_<app>: an Airflow DAG for each tracked app with a `dag:` entry under `apps:`
(`ackfold.app_dags`). None without such an entry."""

# Airflow parses only the files that name both "airflow" and "dag", as this docstring does.
from ackfold.app_dags import app_dags
from ackfold.config import load_settings

globals().update(app_dags(load_settings()))
