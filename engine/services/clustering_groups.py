"""Clustering's work on its groups (`engine.services.clustering` plans and commits): each input group
read merged, ordered and written as new file groups, one task per group (a Spark task with a
session: one job for the plan); and the new locations handed to an index that stores them.

A group runs in one task: its slices are read in threads (Parquet decoding releases the GIL), its
rows ordered (`engine.data.space_curve`), and each output file taken and written in a thread of its
own. Files are sized by the data (the input row groups, without their footers: a file group's bloom
filter is written anew).
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import FILE_NAME_COL, RECORD_KEY_COL
from engine.data import space_curve
from engine.data.base_file import footer_length
from engine.data.batch import repeated
from engine.data.file_names import base_file_name, join_path, parse_base_file_name
from engine.data.slice_reader import SliceFiles, read_slice
from engine.errors import InvalidInputError
from engine.table.clustering_plan import ClusteringGroup, SliceInput
from engine.table.meta_client import MetaClient
from engine.table.ownership import remove_instant_base_files
from engine.write.file_writer import WriteContext, write_base_file
from engine.write.outcome import WriteOutcome


@dataclass(frozen=True)
class GroupJob:
    """Everything one group needs (picklable: it may run in a Spark task)."""

    storage: Any
    instant: str
    schema: pa.Schema
    ordering_field: str | None
    mode: Any
    committed: Callable[[str], bool]
    compression: str
    bloom: tuple[int, float, int]
    sort_columns: tuple[str, ...]
    strategy: str
    method: str
    sample_size: int
    target_bytes: int
    virtual: Any = None
    # without sort columns: by record key (hoodie.bulkinsert.sort.mode other than NONE), else as read
    key_order: bool = True


def base_instant(s: SliceInput) -> str:
    from engine.data.file_names import parse_log_file_name

    if s.base_file:
        bn = parse_base_file_name(s.base_file)
        if bn is not None:
            return bn.instant
    log = parse_log_file_name(s.log_files[0]) if s.log_files else None
    return log.base_instant if log is not None else ""


def read_group(job: GroupJob, group: ClusteringGroup) -> tuple[pa.Table, int]:
    """The group's live records (each slice merged as readers merge it; slices read side by side
    in threads, Parquet decoding releases the GIL) and an estimate of their bytes once written:
    the base files' row groups (their footers, mostly bloom filters, are written anew) plus the
    log files."""
    from concurrent.futures import ThreadPoolExecutor

    def read(s: SliceInput) -> tuple[pa.Table, int]:
        files = SliceFiles(s.partition, s.file_id, base_instant(s), s.base_path, s.log_paths)
        size = sum(job.storage.size(p) for p in s.log_paths)
        if s.base_path:
            # the footer's length from the file's tail (not parsed: the slice's read parses it)
            size += job.storage.size(s.base_path) - footer_length(job.storage, s.base_path)
        rows = read_slice(job.storage, files, job.schema, ordering_field=job.ordering_field, mode=job.mode,
                          is_committed=job.committed)
        return rows, size

    with ThreadPoolExecutor(max(1, min(len(group.slices), os.cpu_count() or 1))) as pool:
        parts = list(pool.map(read, group.slices))
    rows = pa.concat_tables([t for t, _ in parts]) if parts else job.schema.empty_table()
    return rows, sum(n for _, n in parts)


def _combined(rows: pa.Table) -> pa.Table:
    """`rows` with each column in one chunk (columns joined side by side in threads). Taking a
    file's rows out of a table of hundreds of chunks costs far more than joining them first."""
    from concurrent.futures import ThreadPoolExecutor

    if all(c.num_chunks <= 1 for c in rows.columns):
        return rows
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        columns = list(pool.map(lambda c: c.combine_chunks(), rows.columns))
    return pa.Table.from_arrays(columns, schema=rows.schema)


def run_group(job: GroupJob, group: ClusteringGroup, token: str) -> list[WriteOutcome]:
    """Read a group's slices merged, order them, write them as new file groups of about the
    target size each (sized by the data: a file group's bloom filter and footer come on top)."""
    rows, data_bytes = read_group(job, group)
    if rows.num_rows == 0:
        return []
    if job.sort_columns:
        indexes = [job.schema.get_field_index(c) for c in job.sort_columns]
        order = space_curve.order(rows, job.sort_columns, job.strategy, field_indexes=indexes,
                                  method=job.method, sample_size=job.sample_size)
    elif job.key_order:  # a bulk insert's sort (by key): the files hold disjoint key ranges
        order = pc.sort_indices(rows.column(RECORD_KEY_COL)).to_numpy()
    else:  # hoodie.bulkinsert.sort.mode=NONE (Hudi's default): the slices' rows as read
        order = np.arange(rows.num_rows)
    rows = _combined(rows)  # one chunk per column: each file's rows are then taken cheaply
    count = max(1, min(math.ceil(data_bytes / job.target_bytes), rows.num_rows))
    ctx = WriteContext(
        storage=job.storage,
        instant=job.instant,
        schema=job.schema,
        precombine_field=job.ordering_field,
        compression=job.compression,
        bloom=job.bloom,
        sort_by_key=False,
        virtual=job.virtual,
    )
    per_file = math.ceil(rows.num_rows / count)
    name_at = rows.schema.get_field_index(FILE_NAME_COL)

    def write(start: int) -> WriteOutcome:  # each file's rows taken in its own thread
        chunk = rows.take(pa.array(order[start:start + per_file]))
        file_id = f"{uuid.uuid4()}-0"
        name = base_file_name(file_id, token, job.instant)
        path = join_path(group.partition, name)
        chunk = chunk.set_column(name_at, rows.schema.field(name_at), repeated(name, chunk.num_rows))
        written = write_base_file(ctx, path, chunk)
        return WriteOutcome(path=path, file_id=file_id, partition=group.partition, prev_instant=None,
                            num_writes=written.rows, num_inserts=written.rows, num_updates=0, num_deletes=0,
                            num_stale=0, file_size=written.size, min_key=written.min_key, max_key=written.max_key)

    starts = range(0, rows.num_rows, per_file)
    if len(starts) == 1:
        return [write(0)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:  # encoding releases the GIL
        out = list(pool.map(write, starts))
    return out


def run_groups(job: GroupJob, groups: Sequence[ClusteringGroup], spark: Any, say: Callable[[str], None],
               local_max_bytes: int = 0) -> list[WriteOutcome]:
    """Every group: on the driver's threads when there is no session, one group, or the slices read
    fit `local_max_bytes` (`hoodie.write.local.max.bytes`); else as the tasks of one Spark job."""
    from engine.data.scan import read_bytes, run_local, run_tasks

    if spark is None or len(groups) <= 1 or 0 < local_max_bytes and read_bytes([g.metrics for g in groups]) <= local_max_bytes:
        done = [0]

        def one(g: ClusteringGroup, token: str) -> list[WriteOutcome]:
            out = run_group(job, g, token)
            done[0] += 1
            say(f"clustering {job.instant}: group {done[0]}/{len(groups)} ({g.partition or 'table root'}) written")
            return out

        return [o for part in run_local(groups, one) for o in part]

    parts = run_tasks(spark, job.instant, f"hoodie clustering {job.instant}", groups,
                      lambda g, token: run_group(job, g, token))
    outs = [o for part in parts for o in part]
    say(f"clustering {job.instant}: {len(groups)} group(s) written in one Spark job")
    # a retried task may have left files of its first attempt: keep the reported ones
    remove_instant_base_files(job.storage, job.instant, dict.fromkeys((g.partition for g in groups), None),
                              "clustering", keep={o.path for o in outs})
    return outs


def update_index(meta: MetaClient, index: Any, instant: str, outs: list[WriteOutcome], spark: Any) -> None:
    """An index that stores locations (HBase, this engine's RECORD) learns each record's new file
    group before the clustering completes."""
    from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, PART_COL
    from engine.constants import RECORD_KEY_COL
    from engine.index.base import TagContext
    from engine.transaction.undo import read_keys

    parts = []
    for o in outs:
        keys = read_keys(meta, o.path).column(RECORD_KEY_COL)
        n = len(keys)
        parts.append(pa.table({KEY_COL: keys.cast(pa.string()), PART_COL: pa.array([o.partition] * n, pa.string()),
                               FILE_ID_COL: pa.array([o.file_id] * n, pa.string()), OP_COL: pa.array(["U"] * n, pa.string())}))
    located = pa.concat_tables(parts) if parts else pa.table({c: pa.array([], pa.string()) for c in (KEY_COL, PART_COL, FILE_ID_COL, OP_COL)})
    view = meta.file_system_view(meta.timeline())
    ctx = TagContext(spark, meta, view, sorted({o.partition for o in outs}))
    if getattr(index, "updates_on_driver", False) or spark is None:
        if spark is None and not getattr(index, "updates_on_driver", False):
            raise InvalidInputError(
                f"the {index.name} index keeps record locations and updates them in Spark: run the clustering with a SparkSession"
            )
        index.update_location(ctx, instant, located)
    else:
        index.update_location(ctx, instant, spark.createDataFrame(located.to_pandas()))


__all__ = ["GroupJob", "base_instant", "read_group", "run_group", "run_groups", "update_index"]
