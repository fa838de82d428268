"""What each job operation does in the job runner (the only place the console calls Spark).

Writes, data previews and compactions use the runner's SparkSession; the other table services
(rollback, restore, savepoints, clean, archive) work on files through `Maintenance` and need
none, but run here too so that they are queued, audited, cancellable before they start, and
show progress.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq

from engine.facade import MetaClient
from webui.jobs.progress import JobReporter, console_group
from webui.services.plans import to_doc

PREVIEW_MAX_ROWS = 500
_PATHS = {"local": "locally by the job runner (no Spark job)", "one-job": "in one Spark job",
          "distributed": "by Spark (distributed)", "bulk-stream": "by Spark (one pass)"}



def repair_notes(repaired: Any) -> list[str]:
    """The job-log lines of what the repair before a write or service did to Apache Hudi's metadata
    table: removed (and why), partitions dropped alone, created (engine.metadata)."""
    if repaired is None:
        return []
    lines = []
    removed = getattr(repaired, "metadata_table_removed", None)
    if removed:
        lines.append(removed)
    dropped = getattr(repaired, "metadata_partitions_dropped", None) or []
    if dropped:
        lines.append(f"dropped the metadata table partitions {', '.join(dropped)} (not kept by this engine yet; "
                     "Apache Hudi's writers build them again); its files partition is kept up to date")
    if getattr(repaired, "metadata_table_created", False):
        lines.append("created Apache Hudi's metadata table with its files partition (hoodie.metadata.enable=true)")
    built = getattr(repaired, "metadata_partitions_built", None) or []
    if built:
        lines.append(f"built the metadata table partitions {', '.join(built)} from the data files")
    return lines

class JobRefused(Exception):
    """The job cannot run as asked (e.g. the table changed since its plan was confirmed)."""


def jsonable(value: Any) -> Any:
    """A result made safe for a JSON column."""
    return json.loads(json.dumps(to_doc(value), default=_default))


def _default(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


class Operations:
    """Runs one job's operation; `spark_factory` builds the one SparkSession on first need."""

    def __init__(self, spark_factory: Callable[[], Any], options: dict[str, str] | None = None) -> None:
        self._spark_factory = spark_factory
        # write options of every write and service (the console's hoodie.write.concurrency.mode)
        self.options = dict(options or {})

    def spark(self) -> Any:
        return self._spark_factory()

    def run(self, operation: str, params: dict[str, Any], base_path: str, reporter: JobReporter,
            upload_data: bytes | None) -> dict[str, Any]:
        meta = MetaClient.open(base_path)
        if operation in ("upsert", "insert", "delete"):
            return self._write(operation, meta, upload_data, reporter)
        if operation == "preview":
            return self._preview(meta, params, reporter)
        return self._service(operation, meta, params, reporter)

    # ---- writes --------------------------------------------------------------------------------
    def _write(self, operation: str, meta: MetaClient, data: bytes | None, reporter: JobReporter) -> dict[str, Any]:
        from engine.facade import Table

        if data is None:
            raise JobRefused("the uploaded batch is gone; upload it again")
        batch = pq.read_table(io.BytesIO(data))
        reporter(f"{operation} of {batch.num_rows} record(s)")
        started: list[Any] = []

        def session() -> Any:
            # only for a batch the engine does not write locally (engine.write.local): the
            # uploads the console takes are written by the runner's threads, without Spark
            reporter("starting Spark: the write needs it")
            spark = self.spark()
            reporter.spark = spark
            spark.sparkContext.setJobGroup(console_group(reporter.job_id), f"console job {reporter.job_id}",
                                           interruptOnCancel=True)
            started.append(spark)
            return spark

        try:
            result = getattr(Table(session, meta), operation)(batch, options=self.options, progress=reporter)
        finally:
            for spark in started:
                spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        if result.instant:
            reporter.log(f"written {_PATHS.get(result.write_path, 'by Spark')}")
        reporter.log(f"committed instant {result.instant}" if result.instant else "nothing to commit (empty batch)")
        for line in repair_notes(result.repaired):
            reporter.log(line)  # what happened to Apache Hudi's metadata table before the write
        return jsonable(result.to_dict())

    # ---- data preview ---------------------------------------------------------------------------
    def _preview(self, meta: MetaClient, params: dict[str, Any], reporter: JobReporter) -> dict[str, Any]:
        from engine.facade import Table

        mode = params.get("mode", "snapshot")
        limit = max(1, min(int(params.get("limit") or 50), PREVIEW_MAX_ROWS))
        reporter(f"starting Spark: {mode} read")
        spark = self.spark()
        reporter.spark = spark
        sc = spark.sparkContext
        sc.setJobGroup(console_group(reporter.job_id), f"console job {reporter.job_id}", interruptOnCancel=True)
        try:
            table = Table(spark, meta)
            if mode == "incremental":
                df = table.read_incremental(params["instant"], params.get("until") or None)
            elif mode == "as_of":
                df = table.read(as_of=params["instant"])
            elif mode == "read_optimized":
                df = table.read(read_optimized=True)
            else:
                df = table.read()
            reporter("counting rows")
            total = df.count()
            reporter(f"collecting {min(limit, total)} of {total} row(s)")
            data = df.limit(limit).toArrow()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        rows = data.to_pylist()
        # the data first, then where each record lives
        meta_cols = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_commit_seqno",
                     "_hoodie_file_name"]
        columns = [c for c in data.schema.names if c not in meta_cols] + [c for c in meta_cols if c in data.schema.names]
        key_cols = [c for c in ("_hoodie_partition_path", "_hoodie_record_key") if c in columns]
        if key_cols:
            rows.sort(key=lambda r: tuple(str(r[c]) for c in key_cols))
        return jsonable({"mode": mode, "instant": params.get("instant"), "total_rows": total,
                         "columns": columns, "rows": [[r[c] for c in columns] for r in rows]})

    # ---- table services ---------------------------------------------------------------------------
    def _service(self, operation: str, meta: MetaClient, params: dict[str, Any], reporter: JobReporter) -> dict[str, Any]:
        from engine.facade import Maintenance
        from webui.services.snapshot import TableSnapshot

        expected = params.get("fingerprint")
        if expected:
            now = TableSnapshot.load(meta).fingerprint
            if now != expected:
                raise JobRefused(
                    f"the table changed after the plan was confirmed (timeline {expected} is now {now}); "
                    "nothing was done: preview the operation again")
        reporter.check_cancel()
        m = Maintenance(meta, self.options)
        instant = params.get("instant")
        reporter(f"{operation} {instant or ''}".strip())
        if operation == "rollback":
            result = m.rollback(instant)
        elif operation == "restore":
            result = m.restore(instant)
        elif operation == "savepoint":
            result = m.create_savepoint(instant, user=params.get("user"), comment=params.get("comment", ""))
        elif operation == "savepoint_delete":
            result = m.delete_savepoint(instant)
        elif operation == "clean":
            result = m.clean()
        elif operation == "archive":
            result = m.archive()
        elif operation == "compaction":
            return self._compaction(m, instant, reporter)
        elif operation == "clustering":
            return self._clustering(meta, params, reporter)
        elif operation == "metadata_drop":
            reporter(f"dropping metadata partition {params['partition']}")
            result = {"dropped": m.drop_metadata_partition(params["partition"])}
        elif operation == "metadata_build":
            result = self._metadata_build(m, params["partition"], reporter)
        else:
            raise JobRefused(f"unknown operation {operation!r}")
        reporter.log(f"{operation} done")
        doc = jsonable(result)
        doc = doc if isinstance(doc, dict) else {"value": doc}
        if m.last_repair is not None and not m.last_repair.nothing_done:
            doc["repaired"] = jsonable(m.last_repair.to_dict())  # e.g. a stale metadata table removed
            for line in repair_notes(m.last_repair):
                reporter.log(line)
        return doc

    def _metadata_build(self, m: Any, partition: str, reporter: JobReporter) -> Any:
        """Build one partition of Apache Hudi's metadata table from the data files (no Spark)."""
        reporter(f"building metadata partition {partition} from the data files")
        if partition == "record_index":
            built = m.build_metadata_record_index()
            reporter.log(f"record index built at {built.instant}: {built.keys} key(s) in {built.file_groups} file group(s)")
            return built
        if partition == "column_stats":
            built = m.build_metadata_column_stats()
            reporter.log(f"column statistics built at {built.instant}: {built.files} file(s), "
                         f"{len(built.columns)} column(s) in {built.file_groups} file group(s)")
            return built
        if partition == "partition_stats":
            built = m.build_metadata_partition_stats()
            reporter.log(f"partition statistics built at {built.instant}: {built.partitions} partition(s), "
                         f"{len(built.columns)} column(s) in {built.file_groups} file group(s)")
            return built
        report = m.build_metadata_partition(partition)
        reporter.log("metadata table created with its files partition")
        return report

    def _clustering(self, meta: Any, params: dict[str, Any], reporter: JobReporter) -> dict[str, Any]:
        """Run the pending clustering `instant` (or every pending one, or schedule one with the
        confirmed sort columns and layout) with the runner's SparkSession: one task per group."""
        from engine.facade import Maintenance
        from webui.services.plans import clustering_options

        m = Maintenance(meta, {**self.options, **clustering_options(params)})
        reporter("starting Spark: clustering")
        spark = self.spark()
        reporter.spark = spark
        result = m.run_clustering(params.get("instant") or None, spark=spark, progress=reporter)
        if result is None:
            reporter.log("nothing to cluster: no file slice is under the small-file limit")
            return {"instant": None, "nothing_to_cluster": True}
        reporter.log(f"clustering {result.instant} completed: {result.files_replaced} file group(s) replaced by "
                     f"{len(result.files)}, {result.records} record(s)")
        return jsonable(result.to_dict())

    def _compaction(self, m: Any, instant: str | None, reporter: JobReporter) -> dict[str, Any]:
        """Run the pending compaction `instant` (or every pending one, or schedule one) with the
        runner's SparkSession: the slices merge in Spark tasks (the engine's job group
        `hoodie-write-<instant>`, which a cancel stops; the compaction then stays inflight and
        runs again from the start next time)."""
        reporter("starting Spark: compaction")
        spark = self.spark()
        reporter.spark = spark
        result = m.run_compaction(instant or None, spark=spark, progress=reporter)
        if result is None:
            reporter.log("nothing to compact: no file slice has log files")
            return {"instant": None, "nothing_to_compact": True}
        reporter.log(f"compaction {result.instant} completed: {len(result.files)} base file(s), "
                     f"{result.log_files_compacted} log file(s) merged")
        return jsonable(result.to_dict())
