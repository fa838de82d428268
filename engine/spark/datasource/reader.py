"""The read side of the `hudi` data source: planning on the driver, Arrow batches from the tasks.

`HudiReader` is built in a driver-side Python worker (no SparkSession there): it plans the read
with `engine.read.plan` (the same plan `Table.read` scans), takes Spark's pushed filters, and cuts
the slices into input partitions (one per slice, or small slices together). `read` runs in the
executors' Python workers and yields Arrow record batches: base files read as they are (only the
requested columns; pushed filters skip row groups by their statistics), merge-on-read slices
merged with their log files exactly as `Table.read` merges them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from engine.constants import COMMIT_TIME_COL
from engine.data.base_file import conform, read_filtered
from engine.data.slice_reader import SliceFiles, read_slice
from engine.errors import InvalidInputError
from engine.read.plan import SliceRead, commit_filter, plan_incremental, plan_snapshot
from engine.read.prune import Predicate, arrow_filter, group_slices, target_partition_bytes
from engine.read.skipping import kept_slices
from engine.spark.datasource.options import ReadOptions
from engine.storage import Storage
from engine.table.meta_client import MetaClient

# read partitions: Spark's 128 MB splits, spread over at least MIN_PARTITIONS so every core of a
# small cluster gets work, but no smaller than MIN_PARTITION_BYTES: each Python task costs ~50 ms
# before it reads a byte (measured on 2 cores, also for a source that yields one row), about what
# reading 6 MB takes, so 4 MB partitions spent half their time starting (1M-row table, 161 MB:
# 17 partitions 1.41 s, 3 partitions of up to 64 MB 0.82 s)
MAX_PARTITION_BYTES = 128 * 1024 * 1024
MIN_PARTITION_BYTES = 64 * 1024 * 1024
MIN_PARTITIONS = 16
BATCH_ROWS = 65536

_FILTERS: dict[type, str] = {
    EqualTo: "eq", EqualNullSafe: "eq_null_safe", GreaterThan: "gt", GreaterThanOrEqual: "ge",
    LessThan: "lt", LessThanOrEqual: "le", In: "in", IsNull: "is_null", IsNotNull: "is_not_null",
    StringStartsWith: "starts_with", StringEndsWith: "ends_with", StringContains: "contains",
}


def predicate_of(f: Filter) -> Predicate | None:
    """Spark's pushed filter as a `Predicate` on a top-level column (None for anything else)."""
    negated = False
    if isinstance(f, Not):
        negated, f = True, f.child
    op = _FILTERS.get(type(f))
    attr = getattr(f, "attribute", None)
    if op is None or not attr or len(attr) != 1:
        return None
    value = getattr(f, "value", None)
    if op == "in":
        value = tuple(value or ())
    return Predicate(attr[0], op, value, negated)


@dataclass(frozen=True)
class SlicePartition(InputPartition):
    """The file slices one task reads."""

    slices: tuple[SliceFiles, ...]

    def __init__(self, slices: tuple[SliceFiles, ...]) -> None:  # InputPartition has its own __init__
        object.__setattr__(self, "slices", slices)
        object.__setattr__(self, "value", None)


class HudiReader(DataSourceReader):
    """A snapshot, read-optimized, time-travel or incremental read of one table."""

    def __init__(self, path: str, storage_options: dict[str, str], read: ReadOptions, schema: StructType) -> None:
        meta = MetaClient.open(path, storage_options or None)
        if read.query_type == "incremental":
            assert read.begin is not None
            plan, timeline = plan_incremental(meta, read.begin, read.end)
        else:
            plan, timeline = plan_snapshot(meta, read.as_of, read_optimized=read.query_type == "read_optimized")
        self.meta, self.timeline, self.data_skipping = meta, timeline, read.data_skipping
        # the record and secondary indexes hold the latest state: only a read of it looks keys up
        self.latest = read.query_type != "incremental" and read.as_of is None
        self.storage: Storage = meta.storage
        self.columns = [f.name for f in schema.fields]
        unknown = [c for c in self.columns if c not in plan.schema.names]
        if unknown:
            raise InvalidInputError(
                f"columns {unknown} are not in the table at {meta.storage.base_uri} "
                f"(its columns: {', '.join(plan.schema.names)})"
            )
        self.table_schema = plan.schema
        self.out_schema = to_arrow_schema(schema, timezone="UTC")
        self.how: SliceRead = plan.how
        self.base_only = plan.base_only
        self.slices = [SliceFiles.from_slice(s).base_only() if plan.base_only else SliceFiles.from_slice(s)
                       for s in plan.slices]
        self.sizes = [s.size for s in plan.slices]
        self.predicates: list[Predicate] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        """Keep every filter for pruning and skipping; all go back to Spark, which applies them to
        the rows read (skipping is never exact, only safe)."""
        for f in filters:
            pred = predicate_of(f)
            if pred is not None:
                self.predicates.append(pred)
            yield f

    def _kept(self) -> list[int]:
        types = {f.name: f.type for f in self.table_schema}
        return kept_slices(self.meta, self.timeline, self.slices, self.predicates, types, latest=self.latest,
                           data_skipping_on=self.data_skipping)

    def partitions(self) -> list[InputPartition]:
        kept = [i for i in self._kept() if self.slices[i].base_path is not None or self.slices[i].log_paths]
        sizes = [self.sizes[i] for i in kept]
        target = target_partition_bytes(sum(sizes), MIN_PARTITIONS, MAX_PARTITION_BYTES, MIN_PARTITION_BYTES)
        return [SlicePartition(tuple(self.slices[kept[j]] for j in group)) for group in group_slices(sizes, target)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SlicePartition):  # Spark's placeholder for a plan with no partitions
            return
        for files in partition.slices:
            table = read_slice_arrow(self.storage, files, self.table_schema, self.columns, self.how,
                                     self.base_only, self.predicates)
            if table.num_rows:
                yield from conform(table, self.out_schema).to_batches(max_chunksize=BATCH_ROWS)


def read_slice_arrow(
    storage: Storage,
    files: SliceFiles,
    schema: pa.Schema,
    columns: Sequence[str],
    how: SliceRead,
    base_only: bool,
    predicates: Sequence[Predicate] = (),
) -> pa.Table:
    """The `columns` of one slice's records: a base file read as it is (row groups skipped by the
    predicates' statistics) or a slice merged with its logs; only records committed in the read's
    incremental range when it has one."""
    wanted = list(columns)
    needed = wanted + ([COMMIT_TIME_COL] if how.commit_range is not None and COMMIT_TIME_COL not in wanted else [])
    if base_only:
        if files.base_path is None:
            return pa.schema([schema.field(c) for c in wanted]).empty_table()
        read_schema = pa.schema([schema.field(c) for c in needed], metadata=schema.metadata)
        expr = arrow_filter(predicates, schema)
        table = read_filtered(storage, files.base_path, read_schema, expr, {p.column for p in predicates})
    else:
        table = read_slice(storage, files, schema, ordering_field=how.ordering_field, mode=how.mode,
                           is_committed=how.committed, as_of=how.as_of, columns=needed)
    if how.commit_range is not None:
        table = commit_filter(table, how.commit_range)
    return table.select(wanted)
