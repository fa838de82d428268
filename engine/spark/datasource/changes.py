"""CDC queries through the `hudi` data source: `hoodie.datasource.query.type=incremental` with
`hoodie.datasource.query.incremental.format=cdc` returns Apache Hudi's CDC query columns (`op`,
`ts_ms`, `before` and `after` as JSON text), as `Table.read_changes` does.

The driver-side worker finds the window's file group changes (`engine.read.changes`); each task
reads some of them (the CDC log, or the group's versions before and after), so the work spreads
over the executors like a snapshot read's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StringType, StructField, StructType

from engine.config.cdc import CDC_COLUMNS
from engine.read.changes import (
    ChangeReader,
    GroupChange,
    group_changes,
    normalized_window,
    window,
    with_json_images,
)
from engine.spark.datasource.options import ReadOptions
from engine.table.meta_client import MetaClient

CHANGES_SCHEMA = StructType([StructField(c, StringType(), True) for c in CDC_COLUMNS])
PARTITIONS = 16  # at most: each Python task costs ~50 ms before it reads a byte


@dataclass(frozen=True)
class ChangePartition(InputPartition):
    """The file group changes one task reads."""

    changes: tuple[GroupChange, ...]

    def __init__(self, changes: tuple[GroupChange, ...]) -> None:  # InputPartition has its own __init__
        object.__setattr__(self, "changes", changes)
        object.__setattr__(self, "value", None)


class HudiChangesReader(DataSourceReader):
    """A CDC query of one table over (begin, end]."""

    def __init__(self, path: str, storage_options: dict[str, str], read: ReadOptions) -> None:
        assert read.begin is not None
        self.meta = MetaClient.open(path, storage_options or None)
        start, end = normalized_window(self.meta, read.begin, read.end)
        self.timeline = self.meta.timeline()
        self.schema = self.meta.latest_schema(self.timeline)
        self.changes = group_changes(self.meta, window(self.meta, self.timeline, start, end))

    def partitions(self) -> list[InputPartition]:
        if not self.changes or self.schema is None:
            return []
        n = min(PARTITIONS, len(self.changes))
        return [ChangePartition(tuple(self.changes[i::n])) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChangePartition) or self.schema is None:
            return
        reader = ChangeReader(self.meta, self.timeline, self.schema, self.changes)
        for change in partition.changes:
            rows = reader.read(change)
            if rows.num_rows:
                yield from with_json_images(rows).to_batches()


__all__ = ["CHANGES_SCHEMA", "ChangePartition", "HudiChangesReader"]
