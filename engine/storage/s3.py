"""`S3Storage`: a table under an S3 (or S3-compatible: MinIO, moto) bucket prefix.

Reads and listings use pyarrow's S3 filesystem. Writes and deletes use boto3: a single
PutObject is atomic, `If-None-Match: *` makes it exclusive, and deleting through boto3
avoids the empty "dir/" marker objects pyarrow leaves behind. "Directories" are just
key prefixes, so `makedirs` does nothing.

Connection options are resolved once, at construction, from the `options` mapping or
else the standard AWS environment variables, and travel with the pickled object.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.config
import botocore.exceptions
import pyarrow as pa
import pyarrow.fs as pafs

from engine.errors import InvalidConfigError
from engine.storage.base import Storage, _join

# Option keys understood in `storage_for(..., options)`, with the env var used when absent.
ENDPOINT_URL = "endpoint_url"
ACCESS_KEY_ID = "access_key_id"
SECRET_ACCESS_KEY = "secret_access_key"
SESSION_TOKEN = "session_token"
REGION = "region"

_ENV_VARS: dict[str, tuple[str, ...]] = {
    ENDPOINT_URL: ("AWS_ENDPOINT_URL",),
    ACCESS_KEY_ID: ("AWS_ACCESS_KEY_ID",),
    SECRET_ACCESS_KEY: ("AWS_SECRET_ACCESS_KEY",),
    SESSION_TOKEN: ("AWS_SESSION_TOKEN",),
    REGION: ("AWS_REGION", "AWS_DEFAULT_REGION"),
}
_DEFAULT_REGION = "us-east-1"
# S3 answers a failed If-None-Match with 412 PreconditionFailed, and with 409
# ConditionalRequestConflict when a concurrent conditional write to the key is in flight.
_EXISTS_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


def resolve_s3_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """The S3 options to use: each key from `options`, else its env var; region defaults to us-east-1."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(_ENV_VARS))
    if unknown:
        raise InvalidConfigError(f"unknown S3 storage option(s) {unknown}; known: {sorted(_ENV_VARS)}")
    resolved: dict[str, str] = {}
    for key, env_vars in _ENV_VARS.items():
        value = given.get(key) or next((os.environ[v] for v in env_vars if os.environ.get(v)), None)
        if value:
            resolved[key] = value
    resolved.setdefault(REGION, _DEFAULT_REGION)
    endpoint = resolved.get(ENDPOINT_URL)
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
            raise InvalidConfigError(f"S3 endpoint must look like http(s)://host[:port]: {endpoint!r}")
    return resolved


class S3Storage(Storage):
    """Storage rooted at "s3://bucket/prefix" (prefix may be empty; no trailing slash)."""

    _TRANSIENT = (*Storage._TRANSIENT, "_client")
    _IO_ERRORS = (*Storage._IO_ERRORS, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)

    def __init__(self, base_uri: str, options: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base_uri)
        if parts.scheme != "s3" or not parts.netloc:
            raise InvalidConfigError(f"not an S3 URI (want s3://bucket/prefix): {base_uri!r}")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        super().__init__(_join(f"s3://{self.bucket}", self.prefix), resolve_s3_options(options))

    def _init_transient(self) -> None:
        super()._init_transient()
        self._client: Any = None

    def __repr__(self) -> str:
        endpoint = self.options.get(ENDPOINT_URL)
        return f"S3Storage({self.base_uri!r}, endpoint={endpoint!r})" if endpoint else super().__repr__()

    def fs_path(self, rel: str) -> str:
        """The path of `rel` as pyarrow's S3 filesystem expects it: "bucket/prefix/rel"."""
        return _join(_join(self.bucket, self.prefix), rel)

    def key(self, rel: str) -> str:
        """The object key of `rel` inside the bucket."""
        return _join(self.prefix, rel) if self.prefix else rel.strip("/")

    def _make_filesystem(self) -> pafs.FileSystem:
        kwargs: dict[str, Any] = {"region": self.options[REGION], "allow_bucket_creation": False}
        if ACCESS_KEY_ID in self.options and SECRET_ACCESS_KEY in self.options:
            kwargs["access_key"] = self.options[ACCESS_KEY_ID]
            kwargs["secret_key"] = self.options[SECRET_ACCESS_KEY]
            kwargs["session_token"] = self.options.get(SESSION_TOKEN)
        if ENDPOINT_URL in self.options:
            endpoint = urlsplit(self.options[ENDPOINT_URL])
            kwargs["endpoint_override"] = endpoint.netloc
            kwargs["scheme"] = endpoint.scheme
        return pafs.S3FileSystem(**kwargs)

    def client(self) -> Any:
        """The boto3 S3 client; created on first use, never pickled."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        endpoint = self.options.get(ENDPOINT_URL)
        # S3-compatible servers (MinIO, moto) want path-style addressing.
        config = botocore.config.Config(s3={"addressing_style": "path"}) if endpoint else None
        # A session per client: the default boto3 session is not thread-safe.
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=self.options.get(ACCESS_KEY_ID),
            aws_secret_access_key=self.options.get(SECRET_ACCESS_KEY),
            aws_session_token=self.options.get(SESSION_TOKEN),
            region_name=self.options[REGION],
            config=config,
        )

    def read_bytes(self, rel: str) -> bytes:
        """The whole object at `rel` in one GetObject (pyarrow's stream asks a HEAD first: a
        request more per read); FileNotFoundError if it is absent."""
        with self._errors("read", rel):
            try:
                response = self.client().get_object(Bucket=self.bucket, Key=self.key(rel))
            except botocore.exceptions.ClientError as e:
                if _is_missing_error(e):
                    raise FileNotFoundError(f"read {self.uri(rel)}: not found") from e
                raise
            return bytes(response["Body"].read())

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace `rel` with one PutObject (atomic on S3)."""
        with self._errors("write", rel):
            self.client().put_object(Bucket=self.bucket, Key=self.key(rel), Body=data)

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create `rel` with a conditional PutObject (If-None-Match: *); FileExistsError if present."""
        with self._errors("create", rel):
            try:
                self.client().put_object(Bucket=self.bucket, Key=self.key(rel), Body=data, IfNoneMatch="*")
            except botocore.exceptions.ClientError as e:
                if _is_exists_error(e):
                    raise FileExistsError(f"create {self.uri(rel)}: already exists") from e
                raise

    def delete(self, rel: str) -> None:
        """Delete the object at `rel`; a missing object is not an error."""
        with self._errors("delete", rel):
            self.client().delete_object(Bucket=self.bucket, Key=self.key(rel))

    def delete_dir(self, rel: str) -> None:
        """Delete every object under the prefix `rel`/; a missing prefix is not an error."""
        prefix = self.key(rel)
        prefix = f"{prefix}/" if prefix else ""
        with self._errors("delete", rel):
            client = self.client()
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
                if not keys:
                    continue
                result = client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                if result.get("Errors"):
                    first = result["Errors"][0]
                    raise OSError(
                        f"{len(result['Errors'])} object(s) not deleted, first {first['Key']}: {first.get('Message')}"
                    )

    def makedirs(self, rel: str) -> None:
        """Nothing to do: S3 directories are key prefixes."""

    def remove_empty_dirs(self, rel: str) -> None:
        """Nothing to do: an S3 prefix with no object under it does not exist."""

    def open_output_stream(self, rel: str) -> pa.NativeFile:
        """A writable stream to `rel`; the object appears only when the stream is closed."""
        with self._errors("open", rel):
            return self.filesystem().open_output_stream(self.fs_path(rel))


def _is_missing_error(e: botocore.exceptions.ClientError) -> bool:
    code = e.response.get("Error", {}).get("Code")
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("NoSuchKey", "NotFound", "404") or status == 404


def _is_exists_error(e: botocore.exceptions.ClientError) -> bool:
    code = e.response.get("Error", {}).get("Code")
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in _EXISTS_CODES or status == 412
