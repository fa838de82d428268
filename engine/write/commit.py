"""The commit protocol: requested -> inflight -> (data files) -> completed, or abort.

A write is visible only once its completed instant file exists; the completed file is created
exclusively, so two writers can never both complete one instant. `abort` removes everything an
unfinished write created, leaving the table as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa

from engine import failpoints
from engine.data.file_names import (
    has_file_id_stem,
    parse_base_file_name,
    parse_log_file_name,
    partition_metadata_path,
)
from engine.data.log_file import next_log_version
from engine.schema import internal as internal_schema
from engine.schema.avro import arrow_to_avro, avro_to_json, without_meta_fields
from engine.table import failed_writes, lifecycle, schema_history
from engine.table.clustering import REQUESTED_MODEL
from engine.table.lifecycle import (
    claim_instant,
    complete_instant,
    is_instant_completed,
    transition_to_inflight,
)
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.write.operation import Operation
from engine.write.outcome import WriteOutcome
from engine.write.planner import WritePlan


@dataclass
class PendingCommit:
    instant: str
    action: Action
    operation: Operation
    plan: WritePlan
    created_partitions: list[str] = field(default_factory=list)
    # a replacecommit (insert_overwrite): partition -> the file ids it replaces
    replaced: dict[str, list[str]] | None = None
    # a bulk_insert whose tasks name their own file groups (`engine.write.bulk_stream`): the stem
    # of its tasks' file id prefixes; its plan is empty and its partitions are known only from
    # what the tasks report (on failure: from a listing of the table)
    file_id_stems: frozenset[str] = frozenset()

    @property
    def partitions(self) -> list[str]:
        return sorted({b.partition for b in self.plan.buckets})

    @property
    def streamed(self) -> bool:
        return bool(self.file_id_stems)


def start(
    meta: MetaClient,
    timeline: Timeline,
    operation: Operation,
    plan: WritePlan,
    action: Action = Action.COMMIT,
    now: datetime | None = None,
    replaced: dict[str, list[str]] | None = None,
    file_id_stems: Iterable[str] = (),
) -> PendingCommit:
    """Claim a new instant time (strictly after every instant on the timeline) for `action`
    (`commit`, or `deltacommit` on MERGE_ON_READ; `replacecommit` replacing the `replaced` file
    groups) and mark it inflight."""
    time = claim_instant(meta, timeline, action, requested_body(action), now)
    failpoints.hit("write.after_requested")
    pending = PendingCommit(time, action, operation, plan, replaced=replaced, file_id_stems=frozenset(file_id_stems))
    try:
        _mark_inflight(meta, pending)
    except BaseException:
        abort(meta, pending)
        raise
    return pending


def requested_body(action: Action) -> bytes:
    """The requested file of a write: empty, except a replacecommit's, which holds an empty Avro
    `HoodieRequestedReplaceMetadata` (operationType "", no clustering plan) as Apache Hudi's
    `createRequestedCommitWithReplaceMetadata` writes it: readers tell it from a clustering plan."""
    if action is not Action.REPLACE_COMMIT:
        return b""
    from engine.timeline import avro_models

    record = {"operationType": "", "clusteringPlan": None, "extraMetadata": None, "version": 1}
    return avro_models.serialize(REQUESTED_MODEL, record)


def _mark_inflight(meta: MetaClient, pending: PendingCommit) -> None:
    plan = pending.plan
    inflight = CommitMetadata(
        partition_to_write_stats={
            p: [
                WriteStat(
                    fileId=b.file_id,
                    path=None,
                    partitionPath=p,
                    prevCommit=b.prev_instant or "null",
                    numInserts=b.planned_inserts,
                    numUpdateWrites=b.planned_updates,
                    numDeletes=b.planned_deletes,
                )
                for b in plan.buckets
                if b.partition == p
            ]
            for p in pending.partitions
        },
        operation_type=pending.operation.value,
        # version 6 (JSON) keeps the groups to replace in the inflight file too, so that undoing
        # a crashed insert_overwrite restores their index entries; in 8 and 9 the inflight file is
        # an Avro HoodieCommitMetadata, as Java writes it, which has no such field
        partition_to_replace_file_ids=pending.replaced if meta.layout.version < 2 else None,
    )
    transition_to_inflight(meta, pending.instant, pending.action, meta.encode_commit_metadata(inflight))
    for partition in pending.partitions:
        if not meta.storage.exists(partition_metadata_path(partition)):
            meta.ensure_partition_metadata(partition, pending.instant)
            pending.created_partitions.append(partition)


def planned_log_files(plan: WritePlan, instant: str | None = None) -> dict[str, tuple[str, str, int]]:
    """partition/file id -> (file id, instant in the name, version) of the log file each APPEND
    bucket writes: its name up to the write token, which only the task that writes it knows.
    With `instant` (table versions 8, 9) every log file is new and named with it, version 1."""
    out = {}
    for b in plan.buckets:
        if b.append and b.log_base_instant is not None:
            if instant is not None:
                out[f"{b.partition}/{b.file_id}"] = (b.file_id, instant, 1)
                continue
            versions = (n for n in (parse_log_file_name(x) for x in b.log_names) if n is not None)
            out[f"{b.partition}/{b.file_id}"] = (b.file_id, b.log_base_instant, next_log_version(versions))
    return out


def remove_debris(
    meta: MetaClient, pending: PendingCommit, outcomes: list[WriteOutcome], concurrent: bool = False
) -> list[str]:
    """Delete files of this instant that no successful task reported (failed or retried attempts):
    base files named with the instant, and log files with the planned name of an APPEND bucket.

    `concurrent` (optimistic concurrency control): at table version 6 a log file is named with its
    slice's base instant and a version, so another writer that read the same slice writes the
    same name up to the write token. Such a file is taken for ours only when every block it holds
    is this instant's (never another writer's file, finished or still being written)."""
    keep = {o.path for o in outcomes}
    if pending.streamed:
        return _remove_streamed_debris(meta, pending, keep)
    planned = planned_log_files(pending.plan, pending.instant if meta.layout.version >= 2 else None)
    removed = []
    ownership = FileOwnership(meta.storage)
    for partition in pending.partitions:
        for info in meta.storage.list_dir(partition):
            if info.path in keep:
                continue
            parsed = parse_base_file_name(info.name)
            ours = parsed is not None and parsed.instant == pending.instant
            if not ours and planned:
                log = parse_log_file_name(info.name)
                ours = log is not None and planned.get(f"{partition}/{log.file_id}") == (
                    log.file_id, log.base_instant, log.version
                )
                if ours and concurrent and meta.layout.version < 2:
                    ours = _only_blocks_of(meta, info.path, pending.instant)
            if ours and ownership.owned([info.path], "clean-up of a failed write"):
                meta.storage.delete(info.path)
                removed.append(info.path)
    return removed


def _only_blocks_of(meta: MetaClient, path: str, instant: str) -> bool:
    """Whether the log file at `path` holds blocks, all of them `instant`'s."""
    from engine.data.log_file import log_block_instants
    from engine.errors import CorruptTableError

    try:
        instants = log_block_instants(meta.storage, path)
    except (CorruptTableError, FileNotFoundError):
        return False
    return bool(instants) and all(i == instant for i in instants)


def _remove_streamed_debris(meta: MetaClient, pending: PendingCommit, keep: set[str]) -> list[str]:
    """`remove_debris` of a streamed bulk_insert: base files named with the instant and one of its
    file id stem, anywhere in the table (its tasks chose the partitions)."""
    ours = []
    for f in meta.list_data_files():
        if f.path in keep:
            continue
        parsed = parse_base_file_name(f.name)
        if parsed is not None and parsed.instant == pending.instant and has_file_id_stem(parsed.file_id, pending.file_id_stems):
            ours.append(f.path)
    removed = FileOwnership(meta.storage).owned(ours, "clean-up of a failed write")
    for path in removed:
        meta.storage.delete(path)
    return removed


def build_metadata(
    meta: MetaClient,
    pending: PendingCommit,
    write_schema: pa.Schema,
    outcomes: list[WriteOutcome],
    absent_deletes: int,
    extra: dict[str, str] | None = None,
    stale_before_write: int = 0,
) -> CommitMetadata:
    """The completed instant's commit metadata: one write stat per file written, the schema, and
    our counts (`engine.*`) in `extraMetadata`."""
    stats: dict[str, list[WriteStat]] = {}
    for o in sorted(outcomes, key=lambda o: (o.partition, o.file_id)):
        stats.setdefault(o.partition, []).append(o.write_stat())
    extra = {"schema": avro_to_json(arrow_to_avro(write_schema, meta.config.name)), **(extra or {})}
    if absent_deletes:
        extra["engine.deletes.absent"] = str(absent_deletes)
    stale = stale_before_write + sum(o.num_stale for o in outcomes)
    if stale:
        extra["engine.records.stale"] = str(stale)
    return CommitMetadata(stats, pending.operation.value, extra, partition_to_replace_file_ids=pending.replaced)


def record_internal_schema(
    meta: MetaClient, instant: str, write_schema: pa.Schema, metadata: CommitMetadata, start: bool = False
) -> None:
    """On a table with an internal schema (schema on read), what Apache Hudi's writer adds to each
    commit (`saveInternalSchema`): `latestSchema` in the commit metadata (a new version, with the
    instant as its id, when the write added or widened columns) and the history file
    `.hoodie/.schema/<instant>.schemacommit`. `start` (`hoodie.schema.on.read.enable`): a table
    without one gets its first version, with this instant as id."""
    if not start and internal_schema.FILE_COLUMNS_KEY not in (write_schema.metadata or {}):
        return  # the write found no internal schema when it started (an alter since fails it)
    timeline = meta.timeline()
    versions = meta.schema_versions(timeline)
    data = without_meta_fields(internal_schema.without_versions(write_schema))
    if not versions:
        if not start:
            return
        version = internal_schema.from_arrow(data, int(instant))
        history = [version]
    else:
        latest = versions[-1]
        version = internal_schema.evolve(latest, data, int(instant), history=versions[:-1])
        history = versions if version is latest else [*versions, version]
    metadata.extra_metadata[internal_schema.LATEST_SCHEMA_KEY] = version.to_json()
    schema_history.persist(meta.storage, timeline, instant, history)


def complete(
    meta: MetaClient,
    pending: PendingCommit,
    write_schema: pa.Schema,
    outcomes: list[WriteOutcome],
    absent_deletes: int,
    extra: dict[str, str] | None = None,
    stale_before_write: int = 0,
    start_internal_schema: bool = False,
) -> CommitMetadata:
    """Write the completed instant file (exclusively): from here on the write is visible."""
    metadata = build_metadata(meta, pending, write_schema, outcomes, absent_deletes, extra, stale_before_write)
    record_internal_schema(meta, pending.instant, write_schema, metadata, start_internal_schema)
    complete_instant(meta, pending.instant, pending.action, meta.encode_commit_metadata(metadata))
    return metadata


def is_completed(meta: MetaClient, pending: PendingCommit) -> bool:
    return is_instant_completed(meta, pending.instant, pending.action)


def record_failure(meta: MetaClient, pending: PendingCommit) -> None:
    """Remember the write as failed, with the file groups it planned (`engine.table.failed_writes`),
    unless it completed."""
    if not is_completed(meta, pending):
        groups = {(b.partition, b.file_id) for b in pending.plan.buckets}
        failed_writes.record(meta.storage, pending.instant, pending.action.value, groups, pending.file_id_stems)


def abort(meta: MetaClient, pending: PendingCommit, concurrent: bool = False) -> None:
    """Remove what an unfinished write created: its data files, new partition folders, timeline files.

    Never touches a write whose completed instant exists: that data is committed. Under optimistic
    concurrency control (`concurrent`) the partitions it created stay, metadata file and folder,
    as Apache Hudi's rollback leaves them: another writer may be writing its first file there
    right now, and no check-then-delete can see it in time (object stores have no atomic removal
    of an empty folder). A single writer holds the lock for its whole write, so nobody else can
    be in a partition it created: an empty one goes.
    """
    if is_completed(meta, pending):
        return
    lifecycle.abandoned(meta, pending.instant)  # the metadata table's deltacommit for it goes first
    remove_debris(meta, pending, [], concurrent)
    created = [] if concurrent else (
        meta.partitions_with_metadata() if pending.streamed else pending.created_partitions)
    for partition in created:
        rel = partition_metadata_path(partition)
        try:
            text = meta.storage.read_bytes(rel).decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        if f"commitTime={pending.instant}" not in text.splitlines():
            continue  # not (or no longer) the metadata file this write created: never ours to delete
        others = (
            meta.storage.list_files_recursive(partition)
            if partition
            else [f for f in meta.storage.list_dir("") if not f.is_dir]  # a non-partitioned table's files
        )
        if any(f.path != rel for f in others):
            continue  # another writer's files are in it: they need the partition's metadata
        meta.storage.delete(rel)
        if partition and not meta.storage.list_files_recursive(partition):
            meta.storage.delete_dir(partition)
            _remove_empty_parents(meta, partition)
    for state in (State.INFLIGHT, State.REQUESTED):
        meta.storage.delete(meta.instant_path(Instant(pending.instant, pending.action, state)))


def _remove_empty_parents(meta: MetaClient, partition: str) -> None:
    parts = partition.split("/")[:-1]
    while parts:
        rel = "/".join(parts)
        if meta.storage.list_dir(rel):
            return
        meta.storage.delete_dir(rel)
        parts.pop()
