"""Table paths may only lie under the configured warehouse roots (`CONSOLE_WAREHOUSE_ROOTS`).

Local paths are resolved (`..` and symlinks) before the check, so neither traversal nor a
symlink pointing out of a root gets through; S3 URIs are normalised and must start with a
root's `s3://bucket/prefix/`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class PathNotAllowedError(ValueError):
    """The path is outside every warehouse root (or malformed)."""


def check_table_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise ValueError("a table name starts with a letter and has only letters, digits and _ (at most 64)")
    return name


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def resolve_table_path(path: str, roots: Sequence[str]) -> str:
    """The normalised table path, if it lies strictly inside one of `roots`; else PathNotAllowedError."""
    path = (path or "").strip()
    if not path:
        raise PathNotAllowedError("a table path is required")
    if "\x00" in path:
        raise PathNotAllowedError("the path contains a NUL character")
    if _is_remote(path):
        scheme, _, rest = path.partition("://")
        if scheme != "s3":
            raise PathNotAllowedError(f"unsupported scheme {scheme!r} (local paths and s3:// only)")
        if any(seg == ".." for seg in rest.split("/")):
            raise PathNotAllowedError("'..' is not allowed in a table path")
        norm = "s3://" + posixpath.normpath(rest).lstrip("/")
        for root in roots:
            if _is_remote(root) and norm.startswith(root.rstrip("/") + "/"):
                return norm
        raise PathNotAllowedError(f"{path} is not under a warehouse root ({', '.join(roots)})")
    local = path[len("file://"):] if path.startswith("file://") else path
    if not os.path.isabs(local):
        raise PathNotAllowedError("a local table path must be absolute")
    real = os.path.realpath(local)
    for root in roots:
        if _is_remote(root):
            continue
        real_root = os.path.realpath(root)
        if real != real_root and real.startswith(real_root.rstrip(os.sep) + os.sep):
            return real
    raise PathNotAllowedError(f"{path} is not under a warehouse root ({', '.join(roots)})")


def default_table_path(name: str, roots: Sequence[str]) -> str:
    """Where a new table named `name` goes when no path is given: under the first root."""
    check_table_name(name)
    root = roots[0]
    if _is_remote(root):
        return f"{root.rstrip('/')}/{name}"
    return os.path.join(os.path.realpath(root), name)
