"""A table's internal schema versions on storage (``.hoodie/.schema/``), as Apache Hudi keeps them.

Apache Hudi's ``FileBasedInternalSchemaStorageManager`` writes, for each commit of a table with
an internal schema, ``.hoodie/.schema/<instant>.schemacommit`` (after a ``.requested`` and an
``.inflight`` file) holding every version so far; a reader takes the newest such file whose
instant is a completed commit (files of failed or rolled-back commits are ignored, and removed by
the next commit). See :mod:`engine.schema.internal` for the content.
"""

from __future__ import annotations

from engine.errors import CorruptTableError
from engine.schema.internal import (
    SCHEMA_COMMIT,
    SCHEMA_FOLDER,
    InternalSchema,
    history_json,
    parse_history,
)
from engine.timeline.timeline import Timeline

__all__ = ["load", "persist", "remove"]


def _instant_of(name: str) -> str:
    return name.split(".", 1)[0].split("_", 1)[0]


def _names(storage) -> list[str]:
    """The file names in `.hoodie/.schema/` ([] when it does not exist)."""
    try:
        return [f.name for f in storage.list_dir(SCHEMA_FOLDER) if not f.is_dir]
    except FileNotFoundError:
        return []


def _complete_files(storage, timeline: Timeline) -> list[str]:
    return sorted(
        (n for n in _names(storage) if n.endswith("." + SCHEMA_COMMIT) and timeline.is_valid_write(_instant_of(n))),
        key=_instant_of,
    )


def load(storage, timeline: Timeline) -> list[InternalSchema]:
    """The table's versions (oldest first) from the newest valid ``.schemacommit`` file; [] for a
    table without an internal schema."""
    files = _complete_files(storage, timeline)
    if not files:
        return []
    rel = f"{SCHEMA_FOLDER}/{files[-1]}"
    try:
        return parse_history(storage.read_bytes(rel).decode("utf-8"))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptTableError(f"{storage.uri(rel)}: not a schema history ({exc})") from exc


def remove(storage, instant: str) -> None:
    """Delete the history files of `instant` (rolled back: they must not come back as valid if
    its instant time ever falls behind the archived boundary)."""
    for name in _names(storage):
        if _instant_of(name) == instant:
            storage.delete(f"{SCHEMA_FOLDER}/{name}")


def persist(storage, timeline: Timeline, instant: str, versions: list[InternalSchema]) -> None:
    """Write the history for the commit `instant` (before it completes) as Apache Hudi does:
    requested, inflight, then the completed file. Files of instants that are neither pending nor
    completed (failed or rolled back) are removed first."""
    pending = {i.time for i in timeline.pending.instants}
    for name in _names(storage):
        at = _instant_of(name)
        if at != instant and at not in pending and not timeline.is_valid_write(at):
            storage.delete(f"{SCHEMA_FOLDER}/{name}")
    base = f"{SCHEMA_FOLDER}/{instant}.{SCHEMA_COMMIT}"
    storage.write_bytes(base + ".requested", b"")
    storage.write_bytes(base + ".inflight", b"")
    storage.write_bytes(base, history_json(versions).encode("utf-8"))
