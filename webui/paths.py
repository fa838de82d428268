"""Table paths may only lie under the configured warehouse roots (`CONSOLE_WAREHOUSE_ROOTS`).

Only canonical forms are compared (`engine.storage.uri.canonical_uri`, the form every engine
storage is built from): a query, fragment, `..`, encoded separator or empty segment is refused
rather than normalised, so no spelling names another folder than the one checked. Local paths
are then resolved through symlinks, so a symlink pointing out of a root does not get through.
A table never sits at a root itself (it would contain every other table).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from engine.facade import InvalidConfigError, canonical_uri, is_within

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class PathNotAllowedError(ValueError):
    """The path is outside every warehouse root (or malformed)."""


def check_table_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise ValueError("a table name starts with a letter and has only letters, digits and _ (at most 64)")
    return name


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def canonical_root(root: str) -> str:
    """A warehouse root in the form table locations are compared with: `canonical_uri`, and for
    local roots the real path (symlinks resolved)."""
    canonical = canonical_uri(root)
    return canonical if canonical.startswith("s3://") else os.path.realpath(canonical)


def resolve_table_path(path: str, roots: Sequence[str]) -> str:
    """The canonical table location, if it lies strictly inside one of `roots` (never a root
    itself); else PathNotAllowedError. Only canonical forms are compared (`canonical_uri`:
    no query, fragment, `..`, encoded separators or empty segments), local paths after
    resolving symlinks."""
    path = (path or "").strip()
    if not path:
        raise PathNotAllowedError("a table path is required")
    if "\x00" in path:
        raise PathNotAllowedError("the path contains a NUL character")
    if not _is_remote(path):
        local = path[len("file://"):] if path.startswith("file://") else path
        if not os.path.isabs(local):
            raise PathNotAllowedError("a local table path must be absolute")
    try:
        canonical = canonical_uri(path)
    except InvalidConfigError as exc:
        raise PathNotAllowedError(str(exc)) from exc
    if not canonical.startswith("s3://"):
        canonical = os.path.realpath(canonical)
    for root in roots:
        try:
            base = canonical_root(root)
        except InvalidConfigError:
            continue
        if canonical == base:
            raise PathNotAllowedError(f"{path} is the warehouse root {root} itself; a table goes in a folder below it")
        if is_within(canonical, base):
            return canonical
    raise PathNotAllowedError(f"{path} is not under a warehouse root ({', '.join(roots)})")


def default_table_path(name: str, roots: Sequence[str]) -> str:
    """Where a new table named `name` goes when no path is given: under the first root."""
    check_table_name(name)
    root = roots[0]
    return f"{canonical_root(root)}/{name}"
