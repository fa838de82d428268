#!/bin/sh
# One-shot bucket init for the local lakehouse. Runs in quay.io/minio/mc, whose minimal base
# has a shell and coreutils but no sed or grep: plain POSIX sh only.
# Idempotent: creates the lakehouse bucket, a policy limited to that bucket, and the access
# key the engine, console and Spark use (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the
# stack), then attaches the policy to that key. The root credentials never leave MinIO and
# this container.
set -eu

: "${MINIO_URL:?}" "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}"
: "${LAKEHOUSE_BUCKET:?}" "${LAKEHOUSE_ACCESS_KEY:?}" "${LAKEHOUSE_SECRET_KEY:?}"
policy="lakehouse-rw"

mc alias set stack "$MINIO_URL" "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing "stack/$LAKEHOUSE_BUCKET"

policy_file="$(mktemp)"
cat >"$policy_file" <<JSON
{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      "Action": ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
      "Resource": ["arn:aws:s3:::$LAKEHOUSE_BUCKET"]
    },
    {
      "Effect": "Allow",
      "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                 "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
      "Resource": ["arn:aws:s3:::$LAKEHOUSE_BUCKET/*"]
    }
  ]
}
JSON
mc admin policy create stack "$policy" "$policy_file"
rm -f "$policy_file"

mc admin user add stack "$LAKEHOUSE_ACCESS_KEY" "$LAKEHOUSE_SECRET_KEY"
info="$(mc admin user info stack "$LAKEHOUSE_ACCESS_KEY" --json)"
case "$info" in
  *"\"$policy\""*) echo "policy $policy already attached to $LAKEHOUSE_ACCESS_KEY" ;;
  *) mc admin policy attach stack "$policy" --user "$LAKEHOUSE_ACCESS_KEY" ;;
esac
echo "bucket s3://$LAKEHOUSE_BUCKET ready for $LAKEHOUSE_ACCESS_KEY"
