"""Snapshot, read-optimized, time-travel and incremental reads as Spark DataFrames.

Copy-on-write slices are base files, read as they are: by Spark's own parquet reader where it
returns exactly the same rows (a local table whose files were all written under its current
schema: `engine.read.native`), else by pyarrow in Python tasks (`engine.data.scan`). Merge-on-read
slices with log files are merged (base file + committed log blocks, by the precombine field as
hudi-rs merges them: `engine.data.slice_reader`); read-optimized reads take the base files only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession

from engine.data.file_group import FileSlice
from engine.data.keys import ScanFile, SliceMerge
from engine.data.scan import scan_files, scan_slices
from engine.data.slice_reader import SliceFiles
from engine.read import filters as read_filters
from engine.read import skipping
from engine.read.native import native_scan
from engine.read.plan import (  # noqa: F401  (re-exported: callers import them from here)
    ReadPlan,
    completion_window,
    plan_incremental,
    plan_snapshot,
    slice_read,
    table_schema_or_empty,
)
from engine.read.prune import Predicate
from engine.table.meta_client import MetaClient
from engine.table.slice_merge import merge_context
from engine.timeline.timeline import Timeline


def slice_merge(meta: MetaClient, timeline, view) -> SliceMerge | None:
    """How index lookups that read the data files merge this table's slices with their log files
    and, for a table without meta fields, compute its keys (None when neither is needed)."""
    if meta.config.populate_meta_fields and not any(s.log_files for s in view.latest_slices()):
        return None
    return merge_context(meta, timeline)


def scan_latest(
    spark: SparkSession,
    meta: MetaClient,
    timeline: Timeline,
    slices: list[FileSlice],
    schema: pa.Schema,
    *,
    as_of: str | None = None,
    commit_range: tuple[str | None, str | None] | None = None,
    keys: pa.Array | None = None,
) -> DataFrame:
    """The records of `slices`: base files read as they are when no slice has log files, else every
    slice merged with its logs."""
    if not any(s.log_files for s in slices):
        return _scan_base_files(spark, meta, timeline, slices, schema, commit_range, keys)
    how = slice_read(meta, timeline, as_of, commit_range)
    return scan_slices(spark, meta.storage, [SliceFiles.from_slice(s) for s in slices], schema, how, keys=keys)


def _scan_base_files(
    spark: SparkSession,
    meta: MetaClient,
    timeline: Timeline,
    slices: list[FileSlice],
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None = None,
    keys: pa.Array | None = None,
) -> DataFrame:
    """The base files of `slices` as they are: by Spark's parquet reader where it reads them
    exactly as the pyarrow scan does (not for key lookups), else by the pyarrow scan."""
    files = [ScanFile(s.base_file.path, s.partition, s.file_id) for s in slices if s.base_file is not None]
    native = native_scan(spark, meta, timeline, files, schema, commit_range) if keys is None else None
    if native is not None:
        return native
    return scan_files(spark, meta.storage, files, schema, commit_range=commit_range, keys=keys)




def plan_frame(spark: SparkSession, meta: MetaClient, timeline: Timeline, plan: ReadPlan) -> DataFrame:
    """The DataFrame of a read plan."""
    if plan.base_only:
        return _scan_base_files(spark, meta, timeline, plan.slices, plan.schema, plan.commit_range)
    files = [SliceFiles.from_slice(s) for s in plan.slices]
    return scan_slices(spark, meta.storage, files, plan.schema, plan.how)


def read_snapshot(
    spark: SparkSession, meta: MetaClient, as_of: str | None = None, read_optimized: bool = False,
    filters: Sequence[Sequence[Any]] | None = None,
) -> DataFrame:
    """The latest slice of every file group among completed instants (at or before `as_of`);
    `read_optimized`: base files only (merge-on-read log files are not read). `filters`:
    `(column, op, value)` conditions (`engine.read.filters`) the rows returned all meet; the file
    slices that cannot hold such a row are not read (`engine.read.skipping`)."""
    plan, timeline = plan_snapshot(meta, as_of, read_optimized)
    if not filters:
        return plan_frame(spark, meta, timeline, plan)
    predicates = read_filters.parse(filters, plan.schema)
    files = [SliceFiles.from_slice(s).base_only() if plan.base_only else SliceFiles.from_slice(s) for s in plan.slices]
    types = {f.name: f.type for f in plan.schema}
    kept = skipping.kept_slices(meta, timeline, files, predicates, types, latest=as_of is None)
    plan = dataclasses.replace(plan, slices=[plan.slices[i] for i in kept])
    return plan_frame(spark, meta, timeline, plan).where(_condition(predicates))


def _condition(predicates: Sequence[Predicate]) -> Column:
    """The predicates (`engine.read.filters`' kinds) as one Spark condition."""
    from pyspark.sql import functions as F

    out = None
    for p in predicates:
        column = F.col(f"`{p.column}`")
        if p.op == "in":
            cond = column.isin(list(p.value))
        else:
            cond = {"eq": column == F.lit(p.value), "lt": column < F.lit(p.value), "le": column <= F.lit(p.value),
                    "gt": column > F.lit(p.value), "ge": column >= F.lit(p.value)}[p.op]
        cond = ~cond if p.negated else cond
        out = cond if out is None else out & cond
    assert out is not None
    return out


def read_incremental(spark: SparkSession, meta: MetaClient, start: str, end: str | None = None) -> DataFrame:
    """Records whose commit time is in (start, end]: the file groups those commits wrote, each read
    as of `end` (merged with its logs on merge-on-read), keeping the records committed in range."""
    plan, timeline = plan_incremental(meta, start, end)
    return plan_frame(spark, meta, timeline, plan)
