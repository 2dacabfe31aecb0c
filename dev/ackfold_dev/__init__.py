"""ackfold's development wing: what a checkout runs on this machine, for development, the
tests and `make run`. It is a distribution of its own (`ackfold-dev`, `dev/pyproject.toml`),
which `make install` installs editable beside ackfold; the `ackfold` wheel holds none of
it, and a production install never loads it.

- `commands`: its `ackfold` commands (`up`, `demo`, the servers), which join the CLI
  through the entry-point group `ackfold.commands`;
- `server`: what the local servers share; `ports`: loopback hosts and free ports;
- `elasticmq`: a real SQS API (ElasticMQ); `kafka_broker`: a one-node Kafka (KRaft);
- `cluster`: a Spark standalone cluster from the pyspark install; `connect`: a Spark
  Connect server with Delta;
- `stack`: the embedded stack behind `make run` (`airflow standalone`, the demo), with
  the environment it gives Airflow (`airflow_env`) and the local endpoints it sets itself
  (`local_endpoints`: ackfold's defaults are production's);
- `compose_schema`: the Compose Specification's schema that `docker-compose.yml` is
  validated against (there is no Docker engine here to run it);
- `s3`, `s3_app`: a local S3 API (moto) with atomic conditional writes;
- `gcs`, `azurite`: local GCS and Azure Blob APIs (fake-gcs-server, Azurite), each behind
  `store_proxy` (atomic conditional writes, what delta-rs needs and the emulator lacks),
  sharing `emulated` and started by `proxy_process`; `emulators` installs both, pinned.

Nothing a production session needs lives here: its jars and session are `ackfold.spark`.
These run from a checkout: their configuration files are the repository's `conf/`.
"""

from pathlib import Path

# The checkout these development servers run from (`conf/`, `dags/`).
PROJECT_DIR = Path(__file__).resolve().parents[2]
