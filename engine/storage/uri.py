"""Canonical table URIs (pure: no I/O): the one spelling of a table's location.

Every `Storage` is built from `canonical_uri(uri)`, and the console compares canonical forms
only, so two spellings of one folder can never pass as two places, and no spelling can smuggle
a different location past a check. Refused, with `InvalidConfigError` naming the problem:

- a query (`?x`) or fragment (`#x`) on a URI: S3 and file URIs would silently drop them and
  open the folder before them (`s3://b/warehouse/?x` is the warehouse root itself);
- `..` (and `.` in URIs): the location must be the one written;
- percent-encoded separators (`%2F`, `%5C`) and encoded dots (`%2E`): one object key must not
  read as another folder;
- empty segments (`a//b`), backslashes in URIs, control characters;
- schemes other than a plain local path, `file://` and `s3://`.

A single trailing slash is dropped (`s3://b/t/` is `s3://b/t`). Local paths become absolute
(`./lake/t` relative to the working directory); symlinks are not resolved here (that is I/O).
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from engine.errors import InvalidConfigError

_ENCODED = re.compile(r"%(2f|5c|2e)", re.IGNORECASE)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def canonical_uri(uri: str) -> str:
    """The canonical form of a table location: an absolute local path, or `s3://bucket/prefix`.

    Raises InvalidConfigError for the spellings the module docstring lists."""
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidConfigError("a table location is required (the URI is empty)")
    if any(ord(c) < 32 or ord(c) == 127 for c in uri):
        raise InvalidConfigError(f"the table location {uri!r} contains a control character")
    if uri != uri.strip():
        raise InvalidConfigError(f"the table location {uri!r} has leading or trailing spaces")
    scheme = _scheme(uri)
    if scheme == "":
        return _local(uri, uri)
    if "?" in uri or "#" in uri:
        raise InvalidConfigError(f"the table location {uri!r} has a query or fragment ('?', '#'); a table URI has neither")
    if "\\" in uri:
        raise InvalidConfigError(f"the table location {uri!r} contains a backslash")
    if _ENCODED.search(uri):
        raise InvalidConfigError(f"the table location {uri!r} contains a percent-encoded separator or dot (%2F, %5C, %2E)")
    parts = urlsplit(uri)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidConfigError(f"file URI with a remote host is not supported: {uri!r}")
        path = unquote(parts.path)
        if not path:
            raise InvalidConfigError(f"file URI has no path: {uri!r}")
        return _local(path, uri, strict_dots=True)
    if scheme == "s3":
        bucket = parts.netloc
        if not _BUCKET.match(bucket):
            raise InvalidConfigError(f"{uri!r} does not name a valid S3 bucket (want s3://bucket/prefix)")
        segments = _segments(parts.path, uri, strict_dots=True)
        return "/".join([f"s3://{bucket}", *segments])
    raise InvalidConfigError(f"unsupported storage scheme {scheme!r} in {uri!r}; use a local path, file:// or s3://")


def ancestors(canonical: str) -> list[str]:
    """The canonical locations above `canonical`, nearest first, up to the filesystem root or
    the bucket (`s3://b/a/t` -> `s3://b/a`, `s3://b`)."""
    out = []
    if canonical.startswith("s3://"):
        head, _, rest = canonical[len("s3://"):].partition("/")
        segments = rest.split("/") if rest else []
        while segments:
            segments.pop()
            out.append("/".join([f"s3://{head}", *segments]))
        return out
    path = canonical
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def is_within(inner: str, outer: str) -> bool:
    """Whether canonical location `inner` lies strictly inside canonical location `outer`."""
    if inner == outer:
        return False
    sep = "/" if outer.startswith("s3://") or os.sep == "/" else os.sep
    return inner.startswith(outer.rstrip(sep) + sep)


def _scheme(uri: str) -> str:
    head, sep, _ = uri.partition("://")
    if not sep or "/" in head:
        return ""
    return head.lower()


def _local(path: str, original: str, strict_dots: bool = False) -> str:
    relative = not os.path.isabs(path)
    body = path.rstrip("/") if path not in ("/",) else path
    segments = body.split("/")
    if not relative:
        segments = segments[1:]
    if body == "/":
        return "/"
    for i, seg in enumerate(segments):
        if seg == "":
            raise InvalidConfigError(f"the table location {original!r} has an empty path segment ('//')")
        if seg == "..":
            raise InvalidConfigError(f"the table location {original!r} contains '..'")
        if seg == "." and (strict_dots or i > 0 or not relative):
            raise InvalidConfigError(f"the table location {original!r} contains a '.' segment")
    return os.path.abspath(path)


def _segments(path: str, original: str, strict_dots: bool) -> list[str]:
    body = path[1:] if path.startswith("/") else path
    if body.endswith("/"):
        body = body[:-1]
    if not body:
        return []
    segments = body.split("/")
    for seg in segments:
        if seg == "":
            raise InvalidConfigError(f"the table location {original!r} has an empty path segment ('//')")
        if seg in (".", ".."):
            raise InvalidConfigError(f"the table location {original!r} contains a {seg!r} segment")
    return segments
