"""What ackfold runs on this machine, for development, tests and `make run`.

- `jvm`: the JVM jars ackfold needs, resolved once from Maven Central into a local cache;
- `server`: what the local servers share; `ports`: loopback hosts and free ports;
- `elasticmq`: a real SQS API (ElasticMQ); `kafka_broker`: a one-node Kafka (KRaft);
- `cluster`: a Spark standalone cluster from the pyspark install;
- `stack`: the embedded stack behind `make run` (`airflow standalone`, the demo);
- `compose_schema`: the Compose Specification's schema that `docker-compose.yml` is
  validated against (there is no Docker engine here to run it).
"""
