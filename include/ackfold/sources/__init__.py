"""Source queues: where roots come from, and where a replay sends them back.

Every source has the same four duties; how it meets them depends on what it can do:

- read a stream. SQS: `ingest.Ingester` lands messages in `roots`, and apps stream that
  table. Kafka: Spark's own Kafka source.
- register roots. SQS: the ingester, before it deletes. Kafka: the spout stage
  (`kafka_spout.KafkaSpout`), with the record's `topic:partition:offset`.
- acknowledge at the source. SQS: `DeleteMessageBatch` once the roots commit. Kafka: the
  query's checkpoint commit.
- republish for a replay. SQS: `SendMessageBatch` of the stored payload. Kafka: produce
  the record re-read at its offset.

Modules:

- `base`: `SourceQueue` and `PullSource`, the messages in and out, `SourceError`;
- `sqs`, `sqs_client`: SQS through boto3; `ingest`: the SQS spout, receive-register-delete;
- `kafka`: Kafka through confluent-kafka (re-read, republish); `kafka_client`: its clients
  and the admin calls (topics); `kafka_spout`: the spout stage of a Kafka app;
- `sent`: what a producer sent, for the quality checks to hold the ledger to.
- `files`: a folder of JSON files, `FilesInbox`: an example sender to register (a replay
  re-drops the payload into the inbox; `ackfold.replay.senders`).
"""
