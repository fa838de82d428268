"""Altering a table's columns under schema on read: one ``alter_schema`` commit, as Apache Hudi makes it.

Apache Hudi's ``BaseHoodieWriteClient.commitTableChange`` (Spark SQL ``ALTER TABLE ... RENAME
COLUMN / DROP COLUMN / ALTER COLUMN ... TYPE / ... AFTER``) claims a ``commit`` (copy-on-write) or
``deltacommit`` (merge-on-read) instant with operation ``ALTER_SCHEMA`` and no files, writes the
schema history to ``.hoodie/.schema/<instant>.schemacommit``, and completes the instant with
``extraMetadata`` {``schema``: the new Avro schema, ``latestSchema``: the new internal schema}.
No data file is rewritten: files keep their columns and are read by column id
(:mod:`engine.schema.internal`). The first alteration of a table records its schema before
the change as version 0 (covering every earlier file), as Apache Hudi does.

Refused before anything is written (`SchemaChangeError`): see :mod:`engine.schema.changes`;
also while a compaction or clustering is pending (its plan was made, and its files would be
written, under the old names) and on table versions 8 and 9 (not built).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.config.table_config import TableType
from engine.errors import InvalidInputError, SchemaChangeError, SchemaMismatchError, UnsupportedFeatureError
from engine.schema import internal as internal_schema
from engine.schema.avro import arrow_to_avro, avro_to_json, without_meta_fields
from engine.schema.changes import Change, apply_changes
from engine.table import schema_history
from engine.table.lifecycle import claim_instant, complete_instant, transition_to_inflight
from engine.table.meta_client import MetaClient
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant, State
from engine.transaction.conflicts import (
    ALTER_SCHEMA,  # the commit's operationType (Hudi's WriteOperationType)
)

_PLANNED = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION, Action.LOG_COMPACTION,
            Action.CLUSTERING)

__all__ = ["ALTER_SCHEMA", "AlterResult", "alter_schema", "protected_columns"]



@dataclass(frozen=True)
class AlterResult:
    instant: str | None  # None in a dry run
    changes: tuple[str, ...]
    columns: dict[str, str]  # the table's columns after the changes, with their types
    version_id: int | None  # the internal schema version (the instant as a number)


def protected_columns(meta: MetaClient) -> dict[str, str]:
    """Columns that may be neither renamed, dropped nor retyped, with why."""
    cfg = meta.config
    out: dict[str, str] = {}
    for f in cfg.record_key_fields:
        out[f] = "record key field"
    for f in cfg.partition_fields:
        out.setdefault(f.split(":", 1)[0], "partition field")
    if cfg.precombine_field:
        out.setdefault(cfg.precombine_field, "precombine (ordering) field")
    return out


def alter_schema(meta: MetaClient, changes: Sequence[Change], dry_run: bool = False) -> AlterResult:
    """Apply `changes` in one commit (the caller holds the table lock: a service transaction); in a
    dry run, check them and return the schema they would give, changing nothing."""
    if meta.config.version != 6:
        raise UnsupportedFeatureError(
            f"altering columns of a version {meta.config.version} table is not built (version 6 tables only)"
        )
    timeline = meta.timeline()
    pending = [i for i in timeline.pending.instants if i.action in _PLANNED]
    if pending:
        first = pending[0]
        raise SchemaChangeError(
            f"{first.action.value} {first.time} is pending: its files are planned under the current column "
            "names; complete it or roll it back before altering columns (`hoodie repair` rolls back failed "
            "writes; `hoodie compaction run` completes a compaction)"
        )
    versions = meta.schema_versions(timeline)
    current = meta.latest_schema(timeline, versions=versions)
    if current is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no schema yet: write to it before altering columns")
    current = without_meta_fields(internal_schema.without_versions(current))
    new_schema, renamed = apply_changes(current, list(changes), protected_columns(meta))
    base = versions[-1] if versions else internal_schema.from_arrow(current, 0)
    history = versions or [base]
    described = tuple(c.describe() for c in changes)
    if dry_run:
        _evolve(base, new_schema, int(timeline.last_time or 0) + 1, renamed, history, changes)
        return AlterResult(None, described, _columns(new_schema), None)
    action = Action.DELTA_COMMIT if meta.config.table_type is TableType.MERGE_ON_READ else Action.COMMIT
    instant = claim_instant(meta, timeline, action, b"")
    try:
        version = _evolve(base, new_schema, int(instant), renamed, history, changes)
        inflight = CommitMetadata({}, ALTER_SCHEMA, {})
        transition_to_inflight(meta, instant, action, meta.encode_commit_metadata(inflight))
        schema_history.persist(meta.storage, timeline, instant, [*history, version])
        extra = {
            "schema": avro_to_json(arrow_to_avro(new_schema, meta.config.name)),
            internal_schema.LATEST_SCHEMA_KEY: version.to_json(),
        }
        complete_instant(meta, instant, action, meta.encode_commit_metadata(CommitMetadata({}, ALTER_SCHEMA, extra)))
    except BaseException:
        _undo(meta, instant, action)
        raise
    return AlterResult(instant, described, _columns(new_schema), version.version_id)


def _columns(schema: pa.Schema) -> dict[str, str]:
    return {f.name: str(f.type) for f in schema}


def _evolve(base, new_schema, instant: int, renamed, history, changes) -> internal_schema.InternalSchema:
    try:
        version = internal_schema.evolve(base, new_schema, instant, renamed, history[:-1])
    except SchemaMismatchError as exc:
        raise SchemaChangeError(f"{'; '.join(c.describe() for c in changes)}: {exc}") from exc
    if version is base:
        raise SchemaChangeError("the changes leave the schema as it is")
    return version


def _undo(meta: MetaClient, instant: str, action: Action) -> None:
    if meta.completed_file_name(instant, action) is not None:
        return
    schema_history.remove(meta.storage, instant)
    for state in (State.INFLIGHT, State.REQUESTED):
        meta.storage.delete(meta.instant_path(Instant(instant, action, state)))
