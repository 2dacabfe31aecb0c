"""The Reliability UI: pages over the ledger for Airflow 3, and the replay button.

- `filters`: a request's values, parsed into typed filters (every error names its field);
- `queries`: read models over delta-rs (overview, roots table, dead letters).
- `redact`: the capped, masked payload preview.
- `charts`: server-side SVG.
- `security`: the viewer and CSRF protection; `airflow_auth`: Airflow's login for it.
- `selection`: the roots a replay request names; `trigger`: the manual replay DAG run,
  through Airflow's REST API as the user.
- `app`: the FastAPI app (`create_app`), its pages sharing `site` (templates, links, the
  error page) and `context` (what one app's routes share): `ledger_pages`,
  `quality_pages`, `replay_pages`; `lazy`: `LazyApp`, which builds it on the first
  request, so that `ackfold.airflow.plugin` (imported by every Airflow task) stays cheap.
"""
