#!/usr/bin/env bash
# airflow-init in docker-compose.yml, once per `docker compose up`: refuse the placeholder
# secrets of .env.example, migrate the metadata database (Airflow's tables and the FAB auth
# manager's users and roles), let Viewers and Users see the Reliability UI, create the
# admin, create the pool `ackfold_ledger`, and create `spark_default` (Airflow 3 creates no
# connection, and the SparkSubmitOperator would silently target YARN without it).
# Idempotent: a second run changes nothing but the admin password, if .env changed it.
set -euo pipefail

for name in AIRFLOW__CORE__FERNET_KEY AIRFLOW__API__SECRET_KEY AIRFLOW__API_AUTH__JWT_SECRET \
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN AIRFLOW_ADMIN_PASSWORD AWS_ACCESS_KEY_ID \
            AWS_SECRET_ACCESS_KEY; do
  if [[ "${!name:-}" == *CHANGE-ME* ]]; then
    echo "airflow-init: ${name} still holds a CHANGE-ME placeholder from .env.example:" \
         "set a value of your own in .env" >&2
    exit 1
  fi
done

airflow db migrate
# FAB's roles (Admin, Op, User, Viewer, Public) and their permissions.
airflow sync-perm
# A plugin's pages and menu need "can read on Plugins", which FAB gives Op and Admin only:
# Viewers and Users read the Reliability UI (replaying also needs a User's right to
# trigger DAG runs, which a Viewer lacks).
airflow roles add-perms Viewer User --resource Plugins --action can_read

created="$(airflow users create --role Admin --username "$AIRFLOW_ADMIN_USER" \
  --password "$AIRFLOW_ADMIN_PASSWORD" --firstname Airflow --lastname Admin \
  --email "${AIRFLOW_ADMIN_USER}@ackfold.invalid")"
echo "airflow-init: ${created}"
if [[ "$created" == *"already exists"* ]]; then
  airflow users reset-password --username "$AIRFLOW_ADMIN_USER" --password "$AIRFLOW_ADMIN_PASSWORD"
fi

# One slot: reconciles, replays and maintenance take turns on every worker (the DAGs'
# tasks name it; ackfold.airflow.defaults.LEDGER_POOL). Without it those tasks are never scheduled.
airflow pools set ackfold_ledger 1 "ackfold: reconciles, replays and maintenance take turns"

if airflow connections get spark_default >/dev/null 2>&1; then
  echo "airflow-init: connection spark_default exists"
else
  conn="$(python -c 'from ackfold.config import load_settings
from ackfold.airflow.connections import spark_connection_json
print(spark_connection_json(load_settings()))')"
  airflow connections add spark_default --conn-json "$conn"
fi
echo "airflow-init: done"
