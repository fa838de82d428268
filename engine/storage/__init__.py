"""Table storage: one `Storage` per table base URI, chosen by scheme (local path or s3://)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine.errors import InvalidConfigError
from engine.storage.base import FileInfo, Storage
from engine.storage.uri import canonical_uri

__all__ = ["FileInfo", "Storage", "canonical_uri", "storage_for"]


def storage_for(uri: str, options: Mapping[str, str] | None = None) -> Storage:
    """The `Storage` for a table base URI, rooted at its canonical form (`canonical_uri`).

    A plain path or a file:// URI gives a `LocalStorage` rooted at the absolute path
    (`options` are ignored); "s3://bucket/prefix" gives an `S3Storage` whose options
    (endpoint_url, access_key_id, secret_access_key, session_token, region) come from
    `options` or else the standard AWS_* environment variables. Other schemes, and URIs
    with a query, fragment, `..`, encoded separators or empty segments, raise
    InvalidConfigError.
    """
    canonical = canonical_uri(uri)
    if canonical.startswith("s3://"):
        from engine.storage.s3 import S3Storage  # boto3 is imported only when S3 is used

        return S3Storage(canonical, options)
    from engine.storage.local import LocalStorage

    if not os.path.isabs(canonical):  # canonical_uri makes local paths absolute
        raise InvalidConfigError(f"not an absolute local path: {canonical!r}")
    return LocalStorage(canonical)
