"""The write side of the `hudi` data source: tasks stage the rows, the driver commits once.

Spark runs `write` in executor tasks and `commit` in a driver-side Python worker that has no
SparkSession (see ../shared/docs/spark-python-datasource.md). A Hudi write needs one: tagging
against the index, merging file groups and writing the commit are Spark jobs. So:
1. `write` (executors) stages each task's Arrow batches as one Parquet file under the table's
   `.hoodie/.temp/datasource-<id>/` (meta columns dropped, as Apache Hudi drops them);
2. `commit` (driver worker) asks the commit service running in the user's driver process
   (`engine.spark.datasource.service`, started by `register`) to run the write: it opens or creates
   the table and runs `Table.upsert` / `insert` / `bulk_insert` / `delete` (or the overwrite) on
   the staged rows, with the session's executors doing the heavy work and the one commit written
   by the engine as for any `Table` write; the staging folder is removed either way;
3. `abort` removes the staging folder.
Anything the engine refuses comes back as the engine's typed error, and the table is as it was.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from engine import errors
from engine.constants import META_COLUMNS, RECORD_KEY_COL
from engine.storage import storage_for

STAGING_PREFIX = ".hoodie/.temp/datasource-"
MAX_REPLY_BYTES = 1 << 20


@dataclass
class StagedFile(WriterCommitMessage):
    """One task's staged rows (None when the task had no rows)."""

    path: str | None
    rows: int


@dataclass(frozen=True)
class Service:
    """Where the driver's commit service listens, and its secret."""

    host: str
    port: int
    token: str


def staging_dir(write_id: str) -> str:
    return f"{STAGING_PREFIX}{write_id}"


class HudiWriter(DataSourceArrowWriter):
    def __init__(
        self, path: str, storage_options: dict[str, str], options: dict[str, str], overwrite: bool,
        service: Service | None, sql: bool = False,
    ) -> None:
        self.path = path
        self.storage_options = storage_options
        self.options = options
        self.overwrite = overwrite
        self.sql = sql  # a catalog table's INSERT OVERWRITE, not save(path)
        self.service = service
        self.write_id = uuid.uuid4().hex
        self.stage = staging_dir(self.write_id)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
        from pyspark import TaskContext

        storage = storage_for(self.path, self.storage_options or None)
        ctx = TaskContext.get()
        part = f"{ctx.partitionId():05d}-{ctx.attemptNumber()}" if ctx is not None else uuid.uuid4().hex[:8]
        rel = f"{self.stage}/part-{part}-{uuid.uuid4().hex[:8]}.parquet"
        writer: pq.ParquetWriter | None = None
        rows = 0
        sink = None
        try:
            for batch in iterator:
                # meta columns are dropped, as Apache Hudi drops them, but for the record key: the
                # key of an update to a table with auto-generated keys (Hudi's prepped writes)
                keep = [i for i, name in enumerate(batch.schema.names) if name not in META_COLUMNS or name == RECORD_KEY_COL]
                if len(keep) != batch.num_columns:
                    batch = pa.RecordBatch.from_arrays([batch.column(i) for i in keep],
                                                       schema=pa.schema([batch.schema.field(i) for i in keep]))
                if writer is None:
                    storage.makedirs(self.stage)
                    sink = storage.open_output_stream(rel)
                    writer = pq.ParquetWriter(sink, batch.schema, compression="zstd")
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
            if sink is not None:
                sink.close()
        return StagedFile(rel if rows else None, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [m.path for m in messages if isinstance(m, StagedFile) and m.path]
        request = {"path": self.path, "storage_options": self.storage_options, "options": self.options,
                   "overwrite": self.overwrite, "sql": self.sql, "stage": self.stage, "files": staged}
        try:
            reply = call_service(self.service, request)
        finally:
            self._remove_stage()
        if "error" in reply:
            raise error_of(reply["error"])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_stage()

    def _remove_stage(self) -> None:
        remove_stage(self.path, self.storage_options, self.stage)


def remove_stage(path: str, storage_options: dict[str, str], stage: str) -> None:
    """Remove a write's staging folder, and the empty `.hoodie/.temp` and `.hoodie` it made where
    there is no table: each an atomic removal of an empty folder, so a table another writer
    creates there meanwhile is never touched."""
    storage = storage_for(path, storage_options or None)
    storage.delete_dir(stage)
    if not storage.exists(".hoodie/hoodie.properties"):
        storage.remove_empty_dirs(".hoodie")


def call_service(service: Service | None, request: dict) -> dict:
    """Send one request to the driver's commit service and return its reply."""
    if service is None:
        raise errors.InvalidConfigError(
            "writes through the hudi data source need the engine's commit service in the driver: "
            "call engine.spark.register(spark) in the driver (engine.spark.build_session() does), "
            "or write with engine.api.Table"
        )
    payload = service.token.encode() + b"\n" + json.dumps(request).encode() + b"\n"
    try:
        with socket.create_connection((service.host, service.port), timeout=30) as conn:
            conn.settimeout(None)  # a write takes as long as it takes
            conn.sendall(payload)
            data = conn.makefile("rb").readline(MAX_REPLY_BYTES)
    except OSError as exc:
        raise errors.EngineError(
            f"cannot reach the driver's hudi commit service at {service.host}:{service.port} ({exc}); "
            "was engine.spark.register(spark) called in this application's driver?") from exc
    if not data:
        raise errors.EngineError("the driver's hudi commit service closed the connection without a reply")
    return json.loads(data)


def error_of(reply: dict) -> Exception:
    """The engine's typed error from a service reply."""
    cls = getattr(errors, str(reply.get("type")), None)
    message = str(reply.get("message"))
    if isinstance(cls, type) and issubclass(cls, errors.EngineError):
        try:
            return cls(message)
        except TypeError:
            pass
    return errors.EngineError(f"{reply.get('type')}: {message}")
