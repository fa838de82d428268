"""One Spark job per write, for batches that fit the driver (Spark).

The distributed pipeline (`engine.write.executor`) runs about seven Spark jobs for an upsert:
prepare, summarise, tag, profile, the write's shuffle and its writing stage, each with a fixed
cost of 0.1-0.5 s. When the batch is small enough to hold on the driver (the optimizer's size
estimate of the input within `hoodie.write.driver.max.bytes`, default 256 MB), this path instead

1. collects the keyed batch to the driver as Arrow (one job; none when the input is local data),
2. checks, de-duplicates, tags (the index's `locate_batch`: footers cached per file, bloom
   filters, candidate key columns; the RECORD index's sorted files), profiles and plans it there
   with pyarrow (`engine.data.batch`), assigning every record to its bucket, and
3. runs one Spark job without a shuffle: each task receives its buckets' records (Arrow IPC,
   buckets packed by weight over about two tasks per core) and merges and writes their files
   (`write_bucket` / `append_bucket`, exactly as the distributed path's tasks do).

The commit, the index update, failure handling and everything written are the distributed
path's (`WriteJob._commit`). Batches the driver should not hold, indexes without a driver lookup
(HBASE), global indexes that move records between partitions, `_hoodie_is_deleted` rows ordered
against stored records, and overwrites take the distributed path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from engine.columns import FILE_ID_COL, KEY_COL, PART_COL
from engine.data import batch as lb
from engine.data.scan import scan_parallelism
from engine.index.base import TagContext
from engine.read.reader import slice_merge
from engine.runtime.jobs import job_group
from engine.write import bucket_work, local
from engine.write.operation import WriteResult
from engine.write.pipeline import Batch, Profile, Written
from engine.write.planner import WritePlan
from engine.write.prepare import BatchSummary
from engine.write.tagging import profile
from engine.write.tasks import write_groups_task

if TYPE_CHECKING:
    from engine.write.pipeline import Pipeline



def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's optimizer estimate of `df`'s size (exact for local data and cached frames, file
    sizes for scans); None when Spark cannot tell."""
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()
        size = stats.sizeInBytes()  # py4j gives Scala's BigInt as a Python int
        value = size if isinstance(size, int) else int(size.toString())
    except Exception:  # noqa: BLE001 (a plan without statistics: not eligible)
        return None
    return value if value < 2**62 else None


def eligible(job: Pipeline, df: DataFrame) -> bool:
    """Whether `job` plans `df` on the driver (`local.plannable`; see the module docstring) and
    the driver can hold it."""
    if not local.plannable(job, df.columns):
        return False
    if job.config.local_mode == "always" and job.config.driver_plan != "never":
        return True  # written locally whatever its size: it is collected whatever its size
    return job.config.plans_on_driver(estimated_bytes(df))


def collect(prepared: DataFrame) -> pa.Table:
    """The keyed batch on the driver, in arrival order, keys and partitions as plain strings."""
    table = prepared.toArrow()
    for name in (KEY_COL, PART_COL):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).cast(pa.string()))
    return table.combine_chunks()


def summarize(batch: pa.Table) -> BatchSummary:
    parts = sorted(p for p in pc.unique(batch.column(PART_COL)).to_pylist() if p is not None)
    bad = lb.null_keys(batch)
    keys = batch.select([KEY_COL, PART_COL]) if not bad else None
    return BatchSummary(batch.num_rows, bad, parts, keys)


def tag(job: Pipeline, batch: pa.Table, tag_ctx: TagContext) -> pa.Table:
    """`batch` + FILE_ID_COL (null for new keys), looked up on the driver."""
    if not job.operation.tags:
        return batch.append_column(FILE_ID_COL, pa.nulls(batch.num_rows, pa.string()))
    found = job.index.locate_batch(tag_ctx)
    assert found is not None  # eligible() checked that the index looks up on the driver
    return lb.attach_locations(batch, found, job.index.is_global)


def write_buckets(job: Pipeline, spark, rows: pa.Table, plan: WritePlan, batch: Batch, instant: str) -> Written:
    """The write's one Spark job: every bucket of `plan` merged and written by a task; the outcome
    row of each bucket, and (for indexes that store locations) the located records."""
    if not plan.buckets:
        return [], None
    parallelism = job.config.shuffle_parallelism or scan_parallelism(spark, len(plan.buckets))
    work = bucket_work.prepare(job, rows, plan, batch, instant, parallelism)
    payload = [[(b, lb.to_ipc(t)) for b, t in g] for g in work.groups]
    job.progress(f"writing {sum(len(g) for g in payload)} file group(s) for instant {instant}")
    sc = spark.sparkContext
    sc.setJobGroup(job_group(instant), f"hoodie write {instant}", interruptOnCancel=True)
    try:
        outcomes = (
            sc.parallelize(payload, len(payload))
            .mapPartitions(write_groups_task(work.ctx, work.writes, work.actx))
            .collect()
        )
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    if not job.index.wants_locations:
        return outcomes, None

    def located() -> DataFrame | pa.Table:
        table = work.located()
        return table if job.index.updates_on_driver else spark.createDataFrame(table)

    return outcomes, located


def run(job: Pipeline, df: DataFrame, started: float) -> WriteResult:
    """The write planned on the driver: written by its threads when small enough
    (`engine.write.local`), else as one Spark job."""
    spec, timeline, write_schema, data_cols, pc_field = job.schema(df)
    rows = collect(job.keyed(df, spec, data_cols, pc_field, order=False))
    return run_rows(job, rows, spec, timeline, write_schema, pc_field, df.sparkSession, started)


def run_arrow(job: Pipeline, table: pa.Table, started: float, spark_source: Callable[[], object] | None) -> WriteResult:
    """Write the Arrow input `table` (`engine.write.local`): keyed and planned here, written
    locally or (too big for that) in one Spark job of a session from `spark_source`."""
    spec, timeline, write_schema, data_cols, pc_field = job.schema_of(table.schema)
    rows = local.keyed(job, table, spec, data_cols, pc_field)
    return run_rows(job, rows, spec, timeline, write_schema, pc_field, None, started, spark_source)


def run_rows(
    job: Pipeline,
    rows: pa.Table,
    spec,
    timeline,
    write_schema: pa.Schema,
    pc_field: str | None,
    spark,
    started: float,
    spark_source: Callable[[], object] | None = None,
) -> WriteResult:
    """Check, de-duplicate, tag, profile and plan the keyed batch `rows` on the driver, then write
    it: locally when the batch and the file slices it rewrites fit `hoodie.write.local.max.bytes`,
    else in one Spark job (`spark`, or a session from `spark_source` for input that came without
    one)."""
    summary = summarize(rows)
    job.check_keys(spec, summary)
    if summary.total == 0:
        return WriteResult(instant=None, operation=job.operation, seconds=time.monotonic() - started)
    view = job.meta.file_system_view(timeline)
    batch = Batch(None, summary, write_schema, pc_field, timeline, view)
    by = [KEY_COL] if job.index.is_global else [KEY_COL, PART_COL]
    if job.combine() and lb.has_duplicates(rows, by):
        rows = lb.dedupe(rows, pc_field, by)
    rows = lb.with_ops(rows, job.is_delete)
    incoming = summary.keys_by_partition() if job.operation.tags else None
    tag_ctx = TagContext(spark, job.meta, view, summary.partitions, incoming, slice_merge(job.meta, timeline, view))
    if job.operation.tags:
        job.progress(
            f"tagging {summary.total} records against {len(summary.partitions)} partition(s) ({job.index.name}, on the driver)"
        )
    rows = tag(job, rows, tag_ctx)
    workloads, offsets, absent, kept, stale = profile(lb.profile_rows(rows))
    index_stats = job.index.tagging_stats() if job.operation.tags else {}
    prof = Profile(workloads, offsets, absent, summary.total - kept, stale, index_stats)
    plan = job.plan(batch, prof)
    touched = rows.nbytes + sum(bucket_work.touched_sizes(plan, batch).values())
    if local.index_on_driver(job.index) and job.config.writes_locally(touched):
        result = job.commit(batch, tag_ctx, prof, plan, started, lambda i: local.write_buckets(job, rows, plan, batch, i))
        return replace(result, write_path="local")
    if spark is None:
        spark = local.session_for(job, spark_source, touched)
        tag_ctx = replace(tag_ctx, spark=spark)
    result = job.commit(batch, tag_ctx, prof, plan, started, lambda i: write_buckets(job, spark, rows, plan, batch, i))
    return replace(result, write_path="one-job")


__all__ = [
    "collect",
    "eligible",
    "estimated_bytes",
    "run",
    "run_arrow",
    "run_rows",
    "summarize",
    "tag",
    "write_buckets",
]
