"""ackfold's DAGs: reconcile, replay, manual replay, quality, maintenance and smoke, and
one `ackfold_app_<app>` per app with a `dag:` entry. This file is all a DAGs folder needs
(docs/operations/deploy.md); the DAGs come from the installed package."""

from ackfold.airflow.dags import ackfold_dags

globals().update(ackfold_dags())
