"""Task-side writing of one bucket (file group) with Arrow: merge, meta columns, parquet footer.

Runs inside Spark tasks (and in plain Python tests). No Spark imports here.

Incoming rows carry the data columns plus `_hk` (record key), `_hp` (partition path) and
`_op` ("U" upsert/insert, "D" delete).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import failpoints
from engine.columns import KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.constants import (
    COMMIT_SEQNO_COL,
    COMMIT_TIME_COL,
    FILE_NAME_COL,
    FOOTER_MAX_RECORD_KEY,
    FOOTER_MIN_RECORD_KEY,
    META_COLUMNS,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
)
from engine.data.base_file import base_file_instant, conform, read_base_file, remembered_footer
from engine.data.batch import repeated
from engine.data.file_names import base_file_name, join_path
from engine.index.bloom_filter import (
    build_for_keys,
    extended_for_keys,
    footer_entries,
)
from engine.index.key_lookup import cached_bloom
from engine.schema.internal import without_versions
from engine.storage import Storage
from engine.write.cdc_log import CdcLog, Changes, changes_of, write_cdc_file
from engine.write.outcome import WriteOutcome

if TYPE_CHECKING:
    from engine.keygen.keys import KeySpec

# what a table without meta fields leaves null in its files (Apache Hudi fills only the file name)
VIRTUAL_NULL_COLUMNS = (COMMIT_TIME_COL, COMMIT_SEQNO_COL, RECORD_KEY_COL, PARTITION_PATH_COL)



@dataclass(frozen=True)
class BucketWrite:
    """Everything a task needs to write one bucket."""

    partition: str
    file_id: str
    base_path: str | None  # the latest base file to merge with (UPDATE buckets)
    prev_instant: str | None
    # merge-on-read appends (engine.write.log_writer): the slice's base instant the new log file
    # is named with, its existing log files, and the files whose merge is the group's current state
    append: bool = False
    log_base_instant: str | None = None
    log_names: tuple[str, ...] = ()
    read_files: Any = None  # engine.data.slice_reader.SliceFiles


@dataclass(frozen=True)
class WriteContext:
    storage: Storage
    instant: str
    schema: pa.Schema  # meta columns + data columns, as written
    precombine_field: str | None
    compression: str = "snappy"
    row_group_size: int = 1_000_000
    sort_by_key: bool = True
    # False for inserts: append to the file group without matching keys (Hudi's insert keeps both
    # copies of a key that already exists; use upsert to update)
    match_keys: bool = True
    bloom: tuple[int, float, int] = (60_000, 1e-9, 100_000)  # num entries, fpp, max entries
    extra_footer: dict[str, str] = field(default_factory=dict)
    # a table without meta fields (hoodie.populate.meta.fields=false): stored keys are computed from
    # these key fields, and the files get null meta columns and no key footer, as Apache Hudi writes them
    virtual: KeySpec | None = None
    # a table with CDC logging: what a rewrite of a file group logs (engine.write.cdc_log)
    cdc: CdcLog | None = None


def with_meta_columns(rows: pa.Table, ctx: WriteContext, file_name: str, seq_prefix: str) -> pa.Table:
    """`rows` as `ctx.schema` types them, with this write's meta columns (commit time, seqno
    `<seq_prefix><n>`, key, partition, `file_name`); columns the rows lack are null."""
    n = rows.num_rows
    meta = {
        COMMIT_TIME_COL: repeated(ctx.instant, n),
        COMMIT_SEQNO_COL: pc.binary_join_element_wise(seq_prefix, pc.cast(pa.array(np.arange(n)), pa.string()), ""),
        RECORD_KEY_COL: rows.column(KEY_COL).cast(pa.string()),
        PARTITION_PATH_COL: rows.column(PART_COL).cast(pa.string()),
        FILE_NAME_COL: repeated(file_name, n),
    }
    arrays = []
    for f in ctx.schema:
        if f.name in meta:
            arrays.append(meta[f.name])
        elif f.name in rows.column_names:
            col = rows.column(f.name)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=ctx.schema)


def _renamed(rows: pa.Table, ctx: WriteContext, file_name: str) -> pa.Table:
    """Carried-over records keep their commit time and seqno and get the new file name."""
    return rows.set_column(
        rows.schema.get_field_index(FILE_NAME_COL), ctx.schema.field(FILE_NAME_COL), repeated(file_name, rows.num_rows)
    )


def accept_newer(incoming: pa.ChunkedArray, stored: pa.ChunkedArray) -> pa.ChunkedArray:
    """Event-time ordering: keep the incoming value unless it is older than the stored one.

    A null stored value never blocks; a null incoming value loses against a non-null stored one.
    """
    if stored.type != incoming.type:  # the stored type is the table's, never narrower than the batch's
        incoming = incoming.cast(stored.type)
    ge = pc.greater_equal(incoming, stored)
    return pc.or_kleene(pc.is_null(stored), pc.fill_null(ge, False))


def _stored(ctx: WriteContext, path: str) -> tuple[pa.Table, dict[bytes, bytes]]:
    """A base file's rows as `ctx.schema` types them, with their record keys (computed from the
    key fields when the table has no meta fields), and its footer's key-value metadata."""
    # after an index lookup in this process (the local write), its parsed footer: the read below
    # takes it from the cache too; elsewhere (Spark tasks) the footer comes with the rows
    footer = remembered_footer(ctx.storage, path)
    raw = read_base_file(ctx.storage, path)
    if footer is None:
        footer = dict(raw.schema.metadata or {})
    rows = conform(raw, ctx.schema, base_file_instant(path))
    if ctx.virtual is None:
        return rows, footer
    from engine.keygen.keys import key_array

    index = rows.schema.get_field_index(RECORD_KEY_COL)
    return rows.set_column(index, rows.schema.field(index), key_array(ctx.virtual, rows)), footer


def write_bucket(
    ctx: WriteContext, bucket: BucketWrite, incoming: pa.Table, token: str, task_partition: int
) -> WriteOutcome:
    """Merge `incoming` into the bucket's base file (if any) and write the new base file."""
    file_name = base_file_name(bucket.file_id, token, ctx.instant)
    path = join_path(bucket.partition, file_name)
    ops = incoming.column(OP_COL)
    upserts = incoming.filter(pc.equal(ops, OP_UPSERT))
    deletes = incoming.filter(pc.equal(ops, OP_DELETE))
    delete_keys = deletes.column(KEY_COL)
    seq_prefix = f"{ctx.instant}_{task_partition}_"

    num_updates = num_deletes = num_stale = 0
    previous: tuple[dict[bytes, bytes], int, pa.Array, str] | None = None  # for extending the old bloom filter
    changes: Changes | None = None
    if bucket.base_path is not None and not ctx.match_keys:
        stored_rows, _footer = _stored(ctx, bucket.base_path)
        kept = _renamed(stored_rows, ctx, file_name)
        if ctx.cdc is not None:
            none = ctx.schema.empty_table()
            keys = pa.array([], pa.string())
            fresh_rows = with_meta_columns(upserts, ctx, file_name, "")
            changes = changes_of(ctx.cdc, (none, none, keys), (fresh_rows, upserts.column(KEY_COL)), (none, keys))
    elif bucket.base_path is not None:
        old, old_footer = _stored(ctx, bucket.base_path)
        old_keys = old.column(RECORD_KEY_COL)
        pos = pc.index_in(upserts.column(KEY_COL), value_set=old_keys)
        found = pc.is_valid(pos)
        if ctx.precombine_field and upserts.num_rows:
            stored = old.column(ctx.precombine_field).take(pos)  # null position -> null value
            accept = accept_newer(upserts.column(ctx.precombine_field), stored)
        else:
            accept = pa.chunked_array([pa.array([True] * upserts.num_rows, pa.bool_())])
        stale = pc.and_(found, pc.invert(accept))
        num_stale = pc.sum(stale.cast(pa.int64())).as_py() or 0
        upserts = upserts.filter(pc.invert(stale))
        pos = pos.filter(pc.invert(stale))
        if ctx.precombine_field and deletes.num_rows and ctx.precombine_field in deletes.column_names:
            # a delete marker (`_hoodie_is_deleted`) older than the stored record deletes nothing,
            # as in Apache Hudi's DefaultHoodieRecordPayload
            dpos = pc.index_in(delete_keys, value_set=old_keys)
            daccept = accept_newer(deletes.column(ctx.precombine_field), old.column(ctx.precombine_field).take(dpos))
            dstale = pc.and_(pc.is_valid(dpos), pc.invert(daccept))
            num_stale += pc.sum(dstale.cast(pa.int64())).as_py() or 0
            delete_keys = deletes.filter(pc.invert(dstale)).column(KEY_COL)
        is_update = pc.is_valid(pos)
        num_updates = pc.sum(is_update.cast(pa.int64())).as_py() or 0
        replaced = pc.is_in(old_keys, value_set=upserts.column(KEY_COL))
        if len(delete_keys):
            deleted = pc.is_in(old_keys, value_set=delete_keys)
            num_deletes = pc.sum(pc.cast(deleted, pa.int64())).as_py() or 0
            keep = pc.invert(pc.or_(replaced, deleted))
        else:
            keep = pc.invert(replaced)
        kept = _renamed(old.filter(keep), ctx, file_name)
        if ctx.cdc is not None:
            changes = _changes(ctx.cdc, ctx, old, upserts, pos, is_update, deleted if len(delete_keys) else None)
        if not num_deletes and ctx.virtual is None:
            inserted = upserts.column(KEY_COL).filter(pc.invert(is_update))
            previous = (old_footer, old.num_rows, inserted, bucket.base_path)
    else:
        kept = ctx.schema.empty_table()
    fresh = with_meta_columns(upserts, ctx, file_name, seq_prefix)
    num_inserts = fresh.num_rows - num_updates
    out = pa.concat_tables([kept, fresh])
    written = write_base_file(ctx, path, out, previous)
    cdc_file, cdc_size = None, None
    if changes is not None and ctx.cdc is not None:
        cdc_file, cdc_size = write_cdc_file(
            ctx.storage, ctx.cdc, bucket.partition, bucket.file_id, ctx.instant, token, changes)
    return WriteOutcome(
        path=path,
        file_id=bucket.file_id,
        partition=bucket.partition,
        prev_instant=bucket.prev_instant,
        num_writes=written.rows,
        num_inserts=num_inserts,
        num_updates=num_updates,
        num_deletes=num_deletes,
        num_stale=num_stale,
        file_size=written.size,
        min_key=written.min_key,
        max_key=written.max_key,
        cdc_file=cdc_file,
        cdc_size=cdc_size,
    )


def _changes(
    log: CdcLog, ctx: WriteContext, old: pa.Table, upserts: pa.Table, pos: pa.ChunkedArray | pa.Array,
    is_update: pa.ChunkedArray | pa.Array, deleted: pa.ChunkedArray | pa.Array | None,
) -> Changes:
    """What merging `upserts` (positions `pos` in `old`, updates where `is_update`) and deleting
    the `deleted` rows of `old` changes, for the CDC log."""
    after = with_meta_columns(upserts, ctx, "", "")
    keys = upserts.column(KEY_COL).cast(pa.string())
    updated = (old.take(pos.filter(is_update)), after.filter(is_update), keys.filter(is_update))
    fresh = pc.invert(is_update)
    inserted = (after.filter(fresh), keys.filter(fresh))
    if deleted is None:
        removed = (old.schema.empty_table(), pa.array([], pa.string()))
    else:
        removed = (old.filter(deleted), old.column(RECORD_KEY_COL).filter(deleted))
    return changes_of(log, updated, inserted, removed)


@dataclass(frozen=True)
class WrittenFile:
    rows: int
    size: int
    min_key: str | None
    max_key: str | None


# meta columns whose cardinality is known: one value per file (partition path, file name) or a few
# (commit times) are dictionary encoded, one per row (sequence numbers, record keys) are not
_DICTIONARY_META = {COMMIT_TIME_COL: True, PARTITION_PATH_COL: True, FILE_NAME_COL: True,
                    COMMIT_SEQNO_COL: False, RECORD_KEY_COL: False}


def dictionary_columns(table: pa.Table, sample: int = 1000) -> list[str]:
    """Top-level primitive columns worth dictionary encoding: Hudi's meta columns by what they hold,
    the others when at most half of the values of their first `sample` rows are distinct. (Parquet
    writers fall back from a dictionary that grows too big anyway, but only after building it: for
    keys and random strings that is most of the write.)"""
    n = min(sample, table.num_rows)
    out = []
    for f in table.schema:
        if pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type):
            continue
        known = _DICTIONARY_META.get(f.name)
        if known is not None:
            if known:
                out.append(f.name)
            continue
        head = table.column(f.name).slice(0, n)
        if len(pc.unique(head)) * 2 <= max(n, 2):
            out.append(f.name)
    return out


def _bloom(ctx: WriteContext, keys: pa.ChunkedArray, previous: tuple[dict[bytes, bytes], int, pa.Array, str] | None):
    """The file's bloom filter: the old file's extended by the added keys when that is the same
    filter (`extended_for_keys`), else built from every key."""
    if previous is not None:
        footer, old_count, added, old_path = previous
        try:
            old = cached_bloom(ctx.storage, old_path, footer)
        except Exception:  # noqa: BLE001 (an unreadable old filter: build a fresh one)
            old = None
        num_entries, fpp, max_entries = ctx.bloom
        bloom = extended_for_keys(old, old_count, added, len(keys), num_entries, fpp, max_entries)
        if bloom is not None:
            return bloom
    return build_for_keys(keys, *ctx.bloom)


def write_base_file(
    ctx: WriteContext,
    path: str,
    out: pa.Table,
    previous: tuple[dict[bytes, bytes], int, pa.Array, str] | None = None,
) -> WrittenFile:
    """Write records (`ctx.schema`, meta columns filled) as a base file: sorted by record key, with
    Apache Hudi's footer (min/max record key, bloom filter of the keys). `previous`: the footer
    and row count of the base file these records replace, when every one of its keys is among
    them, and the keys added to it (its bloom filter is then extended, not rebuilt)."""
    if ctx.sort_by_key and out.num_rows > 1:
        out = out.take(pc.sort_indices(out.column(RECORD_KEY_COL)))
    keys = out.column(RECORD_KEY_COL)
    min_key = pc.min(keys).as_py() if out.num_rows else None
    max_key = pc.max(keys).as_py() if out.num_rows else None
    footer: dict[str, str | bytes] = dict(ctx.extra_footer)
    if ctx.virtual is not None:  # Apache Hudi writes neither the meta values nor a key footer
        for name in VIRTUAL_NULL_COLUMNS:
            i = out.schema.get_field_index(name)
            out = out.set_column(i, out.schema.field(i), pa.nulls(out.num_rows, out.schema.field(i).type))
    elif min_key is not None and max_key is not None:
        footer[FOOTER_MIN_RECORD_KEY] = min_key
        footer[FOOTER_MAX_RECORD_KEY] = max_key
    if ctx.virtual is None:  # Hudi adds each key as its row is written, so the keys go in in output order
        footer.update(footer_entries(_bloom(ctx, keys, previous)))
    out = out.replace_schema_metadata(without_versions(out.schema).metadata)  # never the read-side ids
    with ctx.storage.open_output_stream(path) as sink:
        # Hudi's footer keys go in the parquet key-value metadata once; with store_schema the
        # ~430 KB bloom filter would be stored a second time inside ARROW:schema
        with pq.ParquetWriter(
            sink, out.schema, compression=ctx.compression, store_schema=False, use_dictionary=dictionary_columns(out)
        ) as writer:
            writer.write_table(out, row_group_size=ctx.row_group_size)
            writer.add_key_value_metadata(footer)
    size = ctx.storage.size(path)
    failpoints.hit("write.file_written")
    return WrittenFile(out.num_rows, size, min_key, max_key)


__all__ = ["META_COLUMNS", "BucketWrite", "WriteContext", "WrittenFile", "accept_newer", "write_base_file", "write_bucket"]
