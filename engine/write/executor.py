"""The write: `WriteJob.run` picks a strategy over the pipeline's steps (`engine.write.pipeline`).

A bulk_insert that needs no planning is one job that writes as it reads
(`engine.write.bulk_stream`); a batch the driver can hold is planned there and written in one job
(`engine.write.one_job`); anything else takes the distributed path below: every step a Spark DAG,
only small aggregates back on the driver (touched partitions, the workload profile, one stats row
per written file), the files written by one task per bucket group after a shuffle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from engine.columns import FILE_ID_COL, OP_COL, OP_UPSERT
from engine.data.scan import scan_parallelism
from engine.errors import EngineError, InvalidConfigError
from engine.keygen.keys import check_auto_key_write
from engine.runtime.errors import translate
from engine.runtime.jobs import job_group
from engine.table.create import require_writable
from engine.write import bulk_stream, local, one_job
from engine.write.bucket_column import bucket_column, needs_numbering
from engine.write.index_rows import located_rows
from engine.write.operation import WriteResult
from engine.write.planner import (
    WritePlan,
)
from engine.write.tasks import BUCKET_COL, OUTCOME_SCHEMA, assign_buckets_task, write_bucket_task

if TYPE_CHECKING:
    pass


from engine.write.outcome import WriteOutcome
from engine.write.pipeline import (  # noqa: F401  (re-exported: the write's public names)
    Batch,
    FileHandle,
    Pipeline,
    Profile,
    Progress,
    Written,
    file_handle,
    write_action,
)


@dataclass
class WriteJob(Pipeline):
    """One write of a batch: `run(df)` writes it as one instant (or none)."""

    # ------------------------------------------------------------------------------------
    def run(self, data: DataFrame | pa.Table, spark_source: Callable[[], Any] | None = None) -> WriteResult:
        """Write `data` (a Spark DataFrame, or an Arrow table typed by `local.input_table`) as one
        instant; the table is left as it was when anything fails. `spark_source` gives a session
        when Arrow input needs Spark after all."""
        started = time.monotonic()
        require_writable(self.meta.config, self.meta.properties_uri)
        self.index.check_available()
        columns = data.column_names if isinstance(data, pa.Table) else data.columns
        if self.meta.config.auto_keys:
            check_auto_key_write(
                self.meta.storage.base_uri,
                self.operation.value,
                columns,
                self.index.name,
                self.index.wants_locations,
            )
        cached: list[DataFrame] = []
        try:
            if isinstance(data, pa.Table):
                if local.eligible(self, data):
                    return one_job.run_arrow(self, data, started, spark_source)
                data = self._spark_frame(data, spark_source)
            df = data
            if bulk_stream.eligible(self):
                return replace(
                    bulk_stream.run(self, df, started, write_action(self.meta.config.table_type)), write_path="bulk-stream"
                )
            if one_job.eligible(self, df):
                return one_job.run(self, df, started)
            batch = self.prepare(df, cached)
            if batch is None:
                return WriteResult(instant=None, operation=self.operation, seconds=time.monotonic() - started)
            tagged, tag_ctx = self.tag(batch, cached)
            tagged, prof = self.profile(batch, tagged, cached)
            plan = self.plan(batch, prof)
            result = self.commit(
                batch,
                tag_ctx,
                prof,
                plan,
                started,
                lambda instant: self.write_distributed(tagged, plan, prof.offsets, batch, instant),
            )
            return replace(result, write_path="distributed")
        except EngineError:
            raise
        except Exception as exc:
            typed = translate(exc)
            if typed is not None:
                raise typed from exc
            raise
        finally:
            for c in cached:
                c.unpersist()

    def _spark_frame(self, table: pa.Table, spark_source: Callable[[], Any] | None) -> DataFrame:
        """Arrow input this write cannot take locally, as a Spark DataFrame."""
        spark = spark_source() if spark_source is not None else None
        if spark is None:
            raise InvalidConfigError(
                f"this {self.operation.value.lower()} needs Spark (an overwrite, the {self.index.name} index, or a "
                "batch above hoodie.write.local.max.bytes), and the table has no SparkSession: open it with one"
            )
        return spark.createDataFrame(table)

    def write_distributed(
        self,
        tagged: DataFrame,
        plan: WritePlan,
        offsets: dict[tuple[int, str], int],
        batch: Batch,
        instant: str,
    ) -> Written:
        """Write every bucket of the plan (one task per bucket group); the outcome row of each file
        written, and the located records (for the index update)."""
        n_buckets = len(plan.buckets)
        if n_buckets == 0:
            return [], None
        updates_idx, ranges = plan.lookup_tables()
        to_write = tagged.filter(F.col(FILE_ID_COL).isNotNull() | (F.col(OP_COL) == OP_UPSERT))
        if needs_numbering(ranges):  # a partition's inserts fill several buckets: number them in Python
            with_bucket_schema = from_arrow_schema(
                to_arrow_schema(to_write.schema, timezone="UTC").append(pa.field(BUCKET_COL, pa.int32()))
            )
            assigned = to_write.mapInArrow(
                assign_buckets_task(updates_idx, ranges, offsets), with_bucket_schema
            )
        else:
            assigned = to_write.withColumn(BUCKET_COL, bucket_column(updates_idx, ranges))
        ctx = self.batch_write_context(batch, instant)
        buckets = {b.index: self.bucket_write(b, batch.view) for b in plan.buckets}
        actx = self.append_context(batch, ctx.schema) if any(b.append for b in plan.buckets) else None
        parallelism = self.config.shuffle_parallelism or scan_parallelism(tagged.sparkSession, n_buckets)
        self.progress(f"writing {n_buckets} file group(s) for instant {instant}")
        written = (
            assigned.repartition(parallelism, BUCKET_COL)
            .groupBy(BUCKET_COL)
            .applyInArrow(write_bucket_task(ctx, buckets, actx), from_arrow_schema(OUTCOME_SCHEMA))
        )
        sc = tagged.sparkSession.sparkContext
        sc.setJobGroup(job_group(instant), f"hoodie write {instant}", interruptOnCancel=True)
        try:
            return [WriteOutcome.from_row(r.asDict()) for r in written.collect()], lambda: located_rows(
                assigned, plan
            )
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


__all__ = ["FileHandle", "WriteJob", "file_handle", "write_action"]
