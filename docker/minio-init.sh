#!/bin/sh
# minio-init in docker-compose.yml, once per `docker compose up`: the warehouse bucket, and
# ackfold's own MinIO user, allowed that bucket only (the root user stays for admins).
# Idempotent: the bucket is kept; the user's secret and policy are set again.
set -eu

case "${MINIO_ROOT_USER}${MINIO_ROOT_PASSWORD}${S3_ACCESS_KEY}${S3_SECRET_KEY}" in
  *CHANGE-ME*)
    echo "minio-init: a CHANGE-ME placeholder from .env.example is still set: edit .env" >&2
    exit 1 ;;
esac

mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing "local/${WAREHOUSE_BUCKET}"

policy=/tmp/ackfold-warehouse.json
cat > "$policy" <<JSON
{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": ["s3:GetBucketLocation", "s3:ListBucket",
      "s3:ListBucketMultipartUploads"], "Resource": ["arn:aws:s3:::${WAREHOUSE_BUCKET}"]},
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
      "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
      "Resource": ["arn:aws:s3:::${WAREHOUSE_BUCKET}/*"]}
  ]
}
JSON
mc admin policy create local ackfold-warehouse "$policy"
mc admin user add local "$S3_ACCESS_KEY" "$S3_SECRET_KEY"
# attach refuses a policy that is attached already: detach first (a no-op the first time).
mc admin policy detach local ackfold-warehouse --user "$S3_ACCESS_KEY" >/dev/null 2>&1 || true
mc admin policy attach local ackfold-warehouse --user "$S3_ACCESS_KEY"
echo "minio-init: bucket ${WAREHOUSE_BUCKET} ready for ${S3_ACCESS_KEY}"
