"""The table's schema history by commit, for the overview: each completed write that changed the
schema, and what changed (columns added, dropped, renamed, retyped, reordered).

Commits of tables with an internal schema (schema on read: `latestSchema` in the commit metadata)
are compared by column id, so a rename shows as one; other commits by column name. Only the
active timeline is read (archived commits are not).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine.facade import LATEST_SCHEMA_KEY, META_FIELDS, EngineError, InternalSchema, avro_to_arrow
from engine.facade import schema_version_at as search
from webui.services.snapshot import TableSnapshot

__all__ = ["diff", "history"]


def _ids(text: str | None) -> dict[str, int] | None:
    if not text:
        return None
    try:
        return {n: i for n, i in InternalSchema.from_json(text).ids().items() if n not in META_FIELDS}
    except (ValueError, KeyError, TypeError):
        return None


def _version_ids(versions: list[InternalSchema], instant: str, avro: str) -> dict[str, int] | None:
    """Ids for a commit written before the table's first `latestSchema` (version 0 covers it)."""
    version = search(versions, instant) if versions else None
    if version is None:
        return None
    ids = {n: i for n, i in version.ids().items() if n not in META_FIELDS}
    try:
        names = avro_to_arrow(avro).names
    except EngineError:
        return None
    return ids if set(names) == set(ids) else None


def diff(old: pa.Schema | None, new: pa.Schema, old_ids: dict[str, int] | None = None,
         new_ids: dict[str, int] | None = None) -> list[str]:
    """What changed from `old` to `new` (top-level columns), by id when both carry ids."""
    if old is None:
        return ["created: " + ", ".join(f"{f.name} {f.type}" for f in new)]
    changes: list[str] = []
    if old_ids is not None and new_ids is not None and set(old_ids) == set(old.names) and set(new_ids) == set(new.names):
        old_by_id = {i: old.field(n) for n, i in old_ids.items()}
        new_by_id = {i: new.field(n) for n, i in new_ids.items()}
        for i, f in new_by_id.items():
            before = old_by_id.get(i)
            if before is None:
                changes.append(f"added {f.name} {f.type}")
                continue
            if before.name != f.name:
                changes.append(f"renamed {before.name} → {f.name}")
            if before.type != f.type:
                changes.append(f"{f.name}: {before.type} → {f.type}")
        changes += [f"dropped {f.name}" for i, f in old_by_id.items() if i not in new_by_id]
        common_old = [old_ids[f.name] for f in old if old_ids[f.name] in new_by_id]
        common_new = [new_ids[f.name] for f in new if new_ids[f.name] in old_by_id]
    else:
        for f in new:
            if f.name not in old.names:
                changes.append(f"added {f.name} {f.type}")
            elif old.field(f.name).type != f.type:
                changes.append(f"{f.name}: {old.field(f.name).type} → {f.type}")
        changes += [f"dropped {f.name}" for f in old if f.name not in new.names]
        common_old = [f.name for f in old if f.name in new.names]  # type: ignore[misc]
        common_new = [f.name for f in new if f.name in old.names]  # type: ignore[misc]
    if common_old != common_new:
        changes.append("columns reordered: " + ", ".join(new.names))
    return changes


def history(snap: TableSnapshot) -> list[dict[str, Any]]:
    """The completed writes (oldest first) whose commit changed the table's schema, with the changes."""
    out: list[dict[str, Any]] = []
    prev: pa.Schema | None = None
    prev_ids: dict[str, int] | None = None
    prev_avro: str | None = None
    try:
        versions = snap.meta.schema_versions(snap.timeline)
    except EngineError:
        versions = []
    for inst in snap.timeline.completed_writes.instants:
        try:
            cm = snap.commit(inst)
        except EngineError:
            continue
        avro = cm.schema
        if not avro:
            continue
        ids = _ids(cm.extra_metadata.get(LATEST_SCHEMA_KEY)) or _version_ids(versions, inst.time, avro)
        if avro == prev_avro and (ids is None or ids == prev_ids):
            continue
        try:
            schema = avro_to_arrow(avro)
        except EngineError:
            continue
        changes = diff(prev, schema, prev_ids, ids)
        if changes:
            out.append({"instant": inst.time, "action": inst.action.value, "operation": cm.operation_type,
                        "changes": changes, "columns": len(schema),
                        "by_id": prev is not None and ids is not None and prev_ids is not None})
        prev, prev_ids, prev_avro = schema, ids, avro
    return out
