"""Task-side appending to a merge-on-read file group (Apache Hudi's append handle), with pyarrow.

The incoming records of one file group become a new log file of the group's latest slice (or,
while a compaction is pending on the group, of the slice that compaction started): a data block
for upserts and inserts (Parquet by default, Avro with `hoodie.logfile.data.block.format=avro`)
and a delete block for deletes, each with the instant and the writer schema in its header. A log
file is never appended to: each write creates `.<fileId>_<baseInstant>.log.<version>_<token>`
with the next version, so a rollback deletes whole files.

Event-time ordering is decided here, against the group's merged records (base file and committed
log blocks): an incoming record (or `_hoodie_is_deleted` marker) older than the stored one is not
written and is counted as stale, exactly as `write_bucket` does on copy-on-write. Every record
that reaches a log therefore wins against what it supersedes, so every reader's merge mode (Apache
Hudi's payloads, hudi-rs's event- and commit-time merging) reads the same table. Deletes are
written with natural ordering (as Spark SQL's DELETE does): every reader applies them.

No Spark imports here (runs inside Spark tasks and in plain Python tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine import failpoints
from engine.columns import KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.constants import (
    RECORD_KEY_COL,
)
from engine.data.file_names import join_path, log_file_name, parse_log_file_name
from engine.data.log_block import encode_avro_data_block, encode_delete_block, encode_parquet_block
from engine.data.log_file import next_log_version, write_log_file
from engine.data.slice_reader import MergeMode, slice_keys, slice_ordering
from engine.write.file_writer import BucketWrite, WriteContext, accept_newer, with_meta_columns
from engine.write.outcome import WriteOutcome

LOG_BLOCK_FORMATS = ("parquet", "avro")


@dataclass(frozen=True)
class AppendContext:
    """What an append task needs beyond the copy-on-write `WriteContext`."""

    writer_schema_json: str  # Avro schema with the meta fields (log block SCHEMA header)
    mode: MergeMode
    committed: Callable[[str], bool]
    block_format: str = "parquet"
    # table versions 8 and 9: each deltacommit writes a new log file named with its own instant
    # (version 1), which joins its slice by completion time; version 6 names it after the slice
    log_per_commit: bool = False


def append_bucket(
    ctx: WriteContext, actx: AppendContext, bucket: BucketWrite, incoming: pa.Table, token: str, task_partition: int
) -> WriteOutcome:
    """Write the incoming records of one file group as a new log file of its slice."""
    assert bucket.log_base_instant is not None
    ops = incoming.column(OP_COL)
    upserts = incoming.filter(pc.equal(ops, OP_UPSERT))
    deletes = incoming.filter(pc.equal(ops, OP_DELETE))
    keys = pc.unique(incoming.column(KEY_COL).combine_chunks().cast(pa.string()))
    stored_keys, stored_values = _stored(ctx, actx, bucket, keys)

    num_stale = 0
    if ctx.precombine_field is not None:
        upserts, n = _drop_stale(upserts, ctx.precombine_field, stored_keys, stored_values)
        num_stale += n
        deletes, n = _drop_stale(deletes, ctx.precombine_field, stored_keys, stored_values)
        num_stale += n
    up_keys = upserts.column(KEY_COL)
    num_updates = _count_in(up_keys, stored_keys)
    live_deletes = deletes.filter(pc.is_in(deletes.column(KEY_COL), value_set=stored_keys))

    if actx.log_per_commit:
        version, named_for = 1, ctx.instant
    else:
        version = next_log_version(n for n in (parse_log_file_name(x) for x in bucket.log_names) if n is not None)
        named_for = bucket.log_base_instant
    name = log_file_name(bucket.file_id, named_for, version, token)
    path = join_path(bucket.partition, name)
    blocks: list[bytes] = []
    if upserts.num_rows:
        records = _log_records(upserts, ctx, bucket.file_id, f"{ctx.instant}_{task_partition}_")
        if actx.block_format == "avro":
            blocks.append(encode_avro_data_block(ctx.instant, records, actx.writer_schema_json))
        else:
            blocks.append(encode_parquet_block(ctx.instant, records, actx.writer_schema_json, ctx.compression))
    if live_deletes.num_rows:
        blocks.append(
            encode_delete_block(
                ctx.instant,
                live_deletes.column(KEY_COL).cast(pa.string()).to_pylist(),
                live_deletes.column(PART_COL).cast(pa.string()).to_pylist(),
                actx.writer_schema_json,
            )
        )
    size = write_log_file(ctx.storage, path, blocks) if blocks else 0
    if blocks:
        failpoints.hit("write.log_written")
    return WriteOutcome(
        path=path if blocks else "",
        file_id=bucket.file_id,
        partition=bucket.partition,
        prev_instant=named_for,  # versions 8, 9 (Apache Hudi 1.x): the deltacommit's own instant
        num_writes=upserts.num_rows,
        num_inserts=upserts.num_rows - num_updates,
        num_updates=num_updates,
        num_deletes=live_deletes.num_rows,
        num_stale=num_stale,
        file_size=size,
        min_key=None,
        max_key=None,
        log_version=version if blocks else None,
        base_file="" if actx.log_per_commit else (
            bucket.base_path.rpartition("/")[2] if bucket.base_path and bucket.prev_instant == bucket.log_base_instant else ""),
        log_files=([name] if actx.log_per_commit else [*bucket.log_names, name]) if blocks else (
            [] if actx.log_per_commit else list(bucket.log_names)),
    )


def _stored(
    ctx: WriteContext, actx: AppendContext, bucket: BucketWrite, keys: pa.Array
) -> tuple[pa.Array, pa.Array | None]:
    """The live keys among `keys` in the group's merged records, and their ordering values."""
    files = bucket.read_files
    if files is None:
        return pa.array([], pa.string()), None
    if ctx.precombine_field is None:
        return slice_keys(ctx.storage, files, mode=actx.mode, is_committed=actx.committed, keys=keys), None
    field = ctx.schema.field(ctx.precombine_field)
    found = slice_ordering(ctx.storage, files, field, mode=actx.mode, is_committed=actx.committed, keys=keys)
    return found.column("key").combine_chunks(), found.column("value").combine_chunks()


def _drop_stale(rows: pa.Table, field: str, stored_keys: pa.Array, stored_values: pa.Array | None) -> tuple[pa.Table, int]:
    if rows.num_rows == 0 or stored_values is None or field not in rows.column_names:
        return rows, 0
    pos = pc.index_in(rows.column(KEY_COL), value_set=stored_keys)
    stored = stored_values.take(pos)
    accept = accept_newer(rows.column(field), pa.chunked_array([stored]))
    stale = pc.and_(pc.is_valid(pos), pc.invert(accept))
    n = pc.sum(stale.cast(pa.int64())).as_py() or 0
    return (rows.filter(pc.invert(stale)), n) if n else (rows, 0)


def _count_in(keys: pa.ChunkedArray, value_set: pa.Array) -> int:
    if len(keys) == 0 or len(value_set) == 0:
        return 0
    return pc.sum(pc.is_in(keys, value_set=value_set).cast(pa.int64())).as_py() or 0


def _log_records(rows: pa.Table, ctx: WriteContext, file_id: str, seq_prefix: str) -> pa.Table:
    """The records as a log data block holds them: meta columns first (`_hoodie_file_name` is the
    bare file id in log records, as Apache Hudi writes it), then the data columns of the schema."""
    out = with_meta_columns(rows, ctx, file_id, seq_prefix)
    return out.take(pc.sort_indices(out.column(RECORD_KEY_COL))) if out.num_rows > 1 else out


__all__ = ["LOG_BLOCK_FORMATS", "AppendContext", "append_bucket"]
