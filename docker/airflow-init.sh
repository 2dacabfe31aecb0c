#!/usr/bin/env bash
# airflow-init in docker-compose.yml, once per `docker compose up`: refuse the placeholder
# secrets of .env.example, write the admin's password for Airflow's simple auth manager,
# migrate the metadata database and create `spark_default` (Airflow 3 creates no
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

passwords="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?}"
mkdir -p "$(dirname "$passwords")"
umask 077
python - "$passwords" <<'PY'
import json, os, sys
users = {os.environ["AIRFLOW_ADMIN_USER"]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}
with open(sys.argv[1], "w") as handle:
    json.dump(users, handle)
PY

airflow db migrate

if airflow connections get spark_default >/dev/null 2>&1; then
  echo "airflow-init: connection spark_default exists"
else
  conn="$(python -c 'from ackfold.config import load_settings
from ackfold.dags import spark_connection_json
print(spark_connection_json(load_settings()))')"
  airflow connections add spark_default --conn-json "$conn"
fi
echo "airflow-init: done"
