"""Table storage: one `Storage` per table base URI, chosen by scheme (local path or s3://)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from engine.errors import InvalidConfigError
from engine.storage.base import FileInfo, Storage

__all__ = ["FileInfo", "Storage", "storage_for"]


def storage_for(uri: str, options: Mapping[str, str] | None = None) -> Storage:
    """The `Storage` for a table base URI.

    A plain path or a file:// URI gives a `LocalStorage` rooted at the absolute,
    normalised path (`options` are ignored); "s3://bucket/prefix" gives an `S3Storage`
    whose options (endpoint_url, access_key_id, secret_access_key, session_token,
    region) come from `options` or else the standard AWS_* environment variables.
    Any other scheme raises InvalidConfigError.
    """
    if not uri:
        raise InvalidConfigError("storage URI is empty")
    parts = urlsplit(uri)
    if parts.scheme == "":
        return _local(uri)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidConfigError(f"file URI with a remote host is not supported: {uri!r}")
        return _local(unquote(parts.path))
    if parts.scheme == "s3":
        from engine.storage.s3 import S3Storage  # boto3 is imported only when S3 is used

        return S3Storage(uri, options)
    raise InvalidConfigError(
        f"unsupported storage scheme {parts.scheme!r} in {uri!r}; use a local path, file:// or s3://"
    )


def _local(path: str) -> Storage:
    from engine.storage.local import LocalStorage

    if not path:
        raise InvalidConfigError("file URI has no path")
    # abspath also normalises ("a/../b", "//", trailing "/").
    return LocalStorage(os.path.abspath(path))
