"""The write pipeline's public types and what its tasks are handed: the prepared `Batch`, the
workload `Profile`, the timeline action and file handle of a table type, and `TaskContexts`, the
pipeline's part that builds the contexts the tasks write with (`WriteContext`, `BucketWrite`,
`AppendContext`). `engine.write.pipeline` holds the steps themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import pyarrow as pa
from pyspark.sql import DataFrame

from engine.config.table_config import TableType
from engine.config.write_config import WriteConfig
from engine.data.slice_reader import SliceFiles, merge_mode_for
from engine.keygen.keys import KeySpec
from engine.schema.avro import arrow_to_avro, avro_to_json, avro_with_meta_fields, with_meta_fields
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from engine.timeline.timeline import CommittedInstants, Timeline
from engine.write.cdc_log import CdcLog
from engine.write.file_writer import BucketWrite, WriteContext
from engine.write.log_writer import AppendContext
from engine.write.operation import Operation
from engine.write.outcome import WriteOutcome
from engine.write.planner import Bucket, PartitionWorkload
from engine.write.prepare import BatchSummary

# what a strategy's file writing returns: one outcome per file, and (for indexes that store
# locations) how to get the located records for the index update
Written = tuple[list[WriteOutcome], Callable[[], DataFrame | pa.Table] | None]
WriteFiles = Callable[[str], Written]

Progress = Callable[[str], None]


class FileHandle(Enum):
    """How a file group that receives records is written: a new base file merging the previous
    one (COPY_ON_WRITE, Hudi's merge handle) or log blocks appended to its latest slice
    (MERGE_ON_READ, Hudi's append handle)."""

    MERGE = "merge"
    APPEND = "append"


def write_action(table_type: TableType) -> Action:
    """The timeline action of a write: `commit` (COPY_ON_WRITE) or `deltacommit` (MERGE_ON_READ)."""
    return Action.DELTA_COMMIT if table_type is TableType.MERGE_ON_READ else Action.COMMIT


def file_handle(table_type: TableType) -> FileHandle:
    return FileHandle.APPEND if table_type is TableType.MERGE_ON_READ else FileHandle.MERGE


@dataclass
class Batch:
    """The prepared input: keyed, de-duplicated records with their operation, and what the
    driver knows about them. `records` is None where the rows are on the driver (the one-job
    write, `engine.write.one_job`)."""

    records: DataFrame | None
    summary: BatchSummary
    write_schema: pa.Schema  # the data columns, as the table's Avro schema types them
    pc_field: str | None  # the precombine field, when the input has it
    timeline: Timeline
    view: FileSystemView
    # the profile's count rows, when preparing counted them (operations that neither tag nor dedupe)
    counts: list | None = None


@dataclass
class Profile:
    """The workload: records per partition and file group, what the planner packs into files."""

    workloads: dict[str, PartitionWorkload]
    offsets: dict[tuple[int, str], int]  # insert-number offsets per (Spark partition, partition)
    absent: int  # deletes of keys not in the table
    dropped: int  # input records that lost the in-batch de-duplication
    stale: int  # records the stored ones won against, decided before writing
    index_stats: dict[str, int] = field(default_factory=dict)


class TaskContexts:
    """What the tasks writing an instant are handed, built from the write's table, settings and
    operation (a base of `engine.write.pipeline.Pipeline`)."""

    meta: MetaClient
    config: WriteConfig
    operation: Operation

    @property
    def is_delete(self) -> bool:
        return self.operation is Operation.DELETE

    def batch_write_context(self, batch: Batch, instant: str) -> WriteContext:
        return self.write_context(batch.write_schema, batch.pc_field, instant)

    def write_context(self, write_schema: pa.Schema, pc_field: str | None, instant: str) -> WriteContext:
        """What the tasks writing `instant` need to know (schema, ordering field, file settings)."""
        return WriteContext(
            storage=self.meta.storage,
            instant=instant,
            schema=with_meta_fields(write_schema),
            precombine_field=pc_field if not self.is_delete else None,
            compression=self.config.compression,
            match_keys=self.operation.tags,
            bloom=(self.config.bloom_num_entries, self.config.bloom_fpp, self.config.bloom_max_entries),
            virtual=KeySpec.from_config(self.meta.config)
            if not self.meta.config.populate_meta_fields
            else None,
            cdc=CdcLog.of_table(self.meta.config, write_schema),
        )

    def bucket_write(self, b: Bucket, view: FileSystemView) -> BucketWrite:
        if not b.append:
            return BucketWrite(b.partition, b.file_id, b.base_path, b.prev_instant)
        group = view.group(b.partition, b.file_id)
        merged = group.merged_slice(view.compaction_pending_on(b.partition, b.file_id)) if group else None
        return BucketWrite(
            b.partition,
            b.file_id,
            b.base_path,
            b.prev_instant,
            append=True,
            log_base_instant=b.log_base_instant,
            log_names=b.log_names,
            read_files=SliceFiles.from_slice(merged) if merged is not None else None,
        )

    def append_context(self, batch: Batch, schema: pa.Schema) -> AppendContext:
        timeline = batch.timeline
        return AppendContext(
            writer_schema_json=avro_to_json(
                avro_with_meta_fields(arrow_to_avro(batch.write_schema, self.meta.config.name))
            ),
            mode=merge_mode_for(self.meta.config),
            committed=CommittedInstants(timeline.completed_write_times, timeline.archived_before),
            block_format=self.config.log_block_format,
            log_per_commit=self.meta.layout.version >= 2,
        )



__all__ = ["Batch", "FileHandle", "Profile", "Progress", "TaskContexts", "WriteFiles", "Written", "file_handle",
           "write_action"]
