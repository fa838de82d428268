"""The commit service: runs data source writes in the user's driver process, where Spark is.

`register(spark)` starts one per session: a thread serving 127.0.0.1 on a free port. A request
(the session's random token on a line of its own, checked before anything more is read, then one
JSON line; each read bounded in size and time) names the table, the write options and the rows
the write's tasks staged; the service opens the table (or creates it, as Apache Hudi's first write
does), runs the `Table` operation on those rows with the session, and answers with the write's
result or the engine's typed error (the writer removes the staged rows either way). Writes run on the session's executors like any `Table` write.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socketserver
import threading
from dataclasses import asdict
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.errors import EngineError, InvalidConfigError, TableExistsError, TableNotFoundError
from engine.spark.datasource.options import WriteOptions, save_mode_operation
from engine.spark.datasource.writer import STAGING_PREFIX, Service

log = logging.getLogger(__name__)
MAX_REQUEST_BYTES = 16 << 20
TOKEN_LINE_BYTES = 128  # the token line: 64 hex digits and a newline
READ_TIMEOUT = 30.0  # seconds for each read of a request (the client sends it at once)
_last_results: dict[int, dict[str, Any]] = {}


def start(spark: SparkSession) -> tuple[Service, socketserver.ThreadingTCPServer]:
    """Start the service for `spark`; the server thread is a daemon (it ends with the process)."""
    token = secrets.token_hex(32)

    class Handler(socketserver.StreamRequestHandler):
        timeout = READ_TIMEOUT  # every read of the request; a client that stalls loses its thread

        def handle(self) -> None:
            try:
                # the token first, on a line of its own: a client without it gets no more than
                # TOKEN_LINE_BYTES read and READ_TIMEOUT of a thread
                presented = self.rfile.readline(TOKEN_LINE_BYTES).strip().decode("ascii", "replace")
                if not hmac.compare_digest(presented, token):
                    return  # not ours: answer nothing
                line = self.rfile.readline(MAX_REQUEST_BYTES)
            except OSError:  # timed out or reset
                return
            try:
                request = json.loads(line)
            except ValueError:
                return
            if not isinstance(request, dict):
                return
            reply = handle(spark, request)
            self.wfile.write(json.dumps(reply).encode() + b"\n")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="hoodie-datasource-commit", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    return Service(str(host), int(port), token), server


def last_result(spark: SparkSession) -> dict[str, Any] | None:
    """The result of this session's latest data source write (`WriteResult` fields)."""
    return _last_results.get(id(spark))


def handle(spark: SparkSession, request: dict[str, Any]) -> dict[str, Any]:
    try:
        result = run_write(spark, request)
        _last_results[id(spark)] = result
        return {"result": result}
    except EngineError as exc:
        return {"error": {"type": type(exc).__name__, "message": str(exc)}}
    except Exception as exc:  # a Spark failure: its message, not a traceback through the socket
        log.exception("hudi data source write failed")
        return {"error": {"type": type(exc).__name__, "message": str(exc).splitlines()[0] if str(exc) else ""}}


def run_write(spark: SparkSession, request: dict[str, Any]) -> dict[str, Any]:

    path = str(request["path"])
    storage_options = {str(k): str(v) for k, v in (request.get("storage_options") or {}).items()}
    stage = str(request["stage"])
    if not stage.startswith(STAGING_PREFIX) or "/" in stage[len(STAGING_PREFIX):]:
        raise InvalidConfigError(f"not a staging folder: {stage!r}")
    files = [str(f) for f in request.get("files") or []]
    if any(not f.startswith(stage + "/") for f in files):
        raise InvalidConfigError("staged files outside the write's staging folder")
    write = WriteOptions.parse(request.get("options") or {})
    op, replace_table = save_mode_operation(write.operation, bool(request.get("overwrite")), bool(request.get("sql")))
    if files and _auto_keyed_insert(path, storage_options, write, files[0], replace_table):
        op = "bulk_insert"  # Apache Hudi's deduceOperation: no key anywhere, so new records with generated keys
    _check_operation(op)
    if not files:  # nothing to write: the table (or the path) stays as it is, as for an empty Table write
        return {"instant": None, "operation": op.upper()}
    # the staging folder is the writer's: its commit() removes it whatever the reply
    if replace_table:
        replaced = _delete_table_for_overwrite(path, storage_options, write, files, stage)
    table, created = _open_or_create(spark, path, storage_options, write, files)
    try:
        df = _staged_frame(spark, table, files)
        result = getattr(table, op)(df, options=write.engine_options or None)
    except BaseException:
        if created:
            _drop_new_table(table, stage)
        raise
    out = asdict(result)
    out["operation"] = str(result.operation)
    if replace_table:
        out["replaced_table"] = replaced
    return json.loads(json.dumps(out, default=str))


def _auto_keyed_insert(path: str, storage_options: dict[str, str], write: WriteOptions, first_file: str,
                       replace_table: bool) -> bool:
    """Apache Hudi's `deduceOperation`: with no operation option, no record key (the table's, or the
    options' for a table the write creates) and no `_hoodie_record_key` column in the rows, the
    write is a bulk_insert whose keys are generated (its quick start's first write)."""
    if write.operation_given or write.record_key:
        return False
    import pyarrow.parquet as pq

    from engine.constants import RECORD_KEY_COL
    from engine.storage import storage_for
    from engine.table.meta_client import MetaClient

    storage = storage_for(path, storage_options or None)
    if not replace_table:
        try:
            if not MetaClient.open(storage).config.auto_keys:
                return False
        except TableNotFoundError:
            pass
    with storage.open_input_file(first_file) as f:
        return RECORD_KEY_COL not in pq.read_schema(f).names


def _check_operation(op: str) -> None:
    from engine.api import Table

    if not hasattr(Table, op):
        raise InvalidConfigError(f"operation {op} is not available through the data source yet; "
                                 "use engine.api.Table's operations")


def _delete_table_for_overwrite(path: str, storage_options: dict[str, str], write: WriteOptions,
                                files: list[str], stage: str) -> bool:
    """mode("overwrite") with an operation other than insert_overwrite_table: the existing table is
    deleted, as Apache Hudi's `handleSaveModes` deletes the base path, and the write creates it again
    from its options. Returns whether there was a table to delete.

    Before anything goes: the options must describe the new table and the staged rows must carry
    record keys (a refused write leaves the table as it was); then under the table lock, with no
    live writer on it, `hoodie.properties` goes first (no one opens the table from then on), then
    every other file but this write's staged rows."""
    from engine.config.write_config import WriteConfig
    from engine.errors import ConcurrentWriteError
    from engine.storage import storage_for
    from engine.table.meta_client import PROPERTIES_PATH, MetaClient
    from engine.transaction.heartbeat import is_writer_gone
    from engine.transaction.lock import TableLock

    storage = storage_for(path, storage_options or None)
    if not storage.exists(PROPERTIES_PATH):
        return False  # a new path: the first write creates the table
    problem = write.creation_problem()
    if problem is not None:
        raise InvalidConfigError(f"mode('overwrite') deletes the table at {path} and creates it again: {problem}")
    _check_staged_keys(storage, files, write.record_key)
    cfg = WriteConfig.from_options(write.engine_options)
    lock = TableLock(storage, "overwrite (save mode)", lease=cfg.lock_lease_ms / 1000, wait=cfg.lock_wait_seconds)
    lock.acquire()
    try:
        meta = MetaClient.open(storage)
        live = [i.time for i in meta.timeline().pending.instants if not is_writer_gone(
            storage, i.time, cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses)]
        if live:
            raise ConcurrentWriteError(
                f"mode('overwrite') would delete the table at {path}, but instant(s) {', '.join(live)} are being "
                "written by a live writer: nothing was deleted; retry once it has finished")
        lock.check()
        storage.delete(PROPERTIES_PATH)
        keep = (f"{stage}/", ".hoodie/.lock/")
        for info in storage.list_files_recursive(""):
            if not info.path.startswith(keep):
                storage.delete(info.path)
    finally:
        locks = [f.path for f in storage.list_files_recursive(".hoodie/.lock")]
        lock.release()
    if not storage.exists(PROPERTIES_PATH):
        for rel in locks:
            storage.delete(rel)
        storage.remove_empty_dirs("")
    log.warning("mode('overwrite'): deleted the table at %s to create it again (as Apache Hudi does)", path)
    return True


def _check_staged_keys(storage, files: list[str], fields: tuple[str, ...]) -> None:
    """InvalidInputError when a staged row has no record key (a simple key null or empty; every
    part of a complex key null or empty): checked before mode("overwrite") deletes anything."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from engine.errors import InvalidInputError

    for rel in files:
        with storage.open_input_file(rel) as f:
            parquet = pq.ParquetFile(f)
            missing = [k for k in fields if k not in parquet.schema_arrow.names]
            if missing:
                raise InvalidInputError(f"the input has no record key column(s) {', '.join(missing)}")
            table = parquet.read(columns=list(fields))
        absent = None
        for name in fields:
            text = pc.cast(table.column(name), "string")
            empty = pc.fill_null(pc.equal(text, ""), True)
            absent = empty if absent is None else pc.and_(absent, empty)
        bad = pc.sum(pc.cast(absent, "int64")).as_py() if absent is not None else 0
        if bad:
            raise InvalidInputError(
                f"{bad} record(s) have a null or empty record key ({', '.join(fields)}): nothing was written and "
                "the table was not deleted")


def _open_or_create(spark: SparkSession, path: str, storage_options: dict[str, str], write: WriteOptions, files):
    from engine.api import Table

    try:
        table = Table.open(spark, path, storage_options or None)
    except TableNotFoundError:
        problem = write.creation_problem()
        if problem is not None:
            raise InvalidConfigError(problem) from None
        if write.operation == "delete":
            raise TableNotFoundError(f"no Hudi table at {path} to delete from") from None
        kwargs: dict[str, Any] = {}
        if write.table_version is not None:
            kwargs["table_version"] = write.table_version
        partitions = list(write.partition_fields) or None
        if write.key_generator in ("TIMESTAMP", "CUSTOM"):
            kwargs["key_generator"] = write.key_generator
            kwargs["key_generator_options"] = {
                k: v for k, v in write.engine_options.items() if k.startswith("hoodie.keygen.timebased.")}
            if write.key_generator == "CUSTOM":
                partitions = [p for p in write.partition_specs if p] or None
        if write.url_encode is not None:
            kwargs["url_encode"] = write.url_encode
        if write.metadata is not None:  # unset: Apache Hudi 1.x's default (a metadata table from version 8)
            kwargs["metadata"] = write.metadata
        if write.cdc or write.cdc_mode is not None:  # (a mode without CDC: Table.create refuses it)
            kwargs["cdc"], kwargs["cdc_mode"] = bool(write.cdc), write.cdc_mode
        try:
            table = Table.create(
                spark, path, name=str(write.table_name), record_key=list(write.record_key) or None,
                partition_fields=partitions, precombine_field=write.precombine,
                table_type=write.table_type or "COPY_ON_WRITE", index=write.index_type or "BLOOM",
                hive_style=bool(write.hive_style), storage_options=storage_options or None, **kwargs,
            )
        except TableExistsError:  # another writer created it meanwhile
            return Table.open(spark, path, storage_options or None), False
        return table, True
    check_conflicts(write, table.config, path)
    return table, False


def _staged_frame(spark: SparkSession, table, files: list[str]) -> DataFrame:
    """The staged rows as a DataFrame: Spark's parquet reader on a local table, the engine's
    pyarrow scan elsewhere (no s3a connector)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from engine.data.keys import ScanFile
    from engine.data.scan import scan_files
    from engine.storage.local import LocalStorage

    storage = table.meta.storage
    with storage.open_input_file(files[0]) as f:
        schema = pq.read_schema(f)
    if isinstance(storage, LocalStorage):
        return spark.read.schema(from_arrow_schema(schema)).parquet(*[f"file://{storage.fs_path(f)}" for f in files])
    return scan_files(spark, storage, [ScanFile(f, "", "") for f in files], schema)


def _drop_new_table(table, stage: str) -> None:
    """Remove the table this request created when its first write failed, so that the path is as
    it was - but never a table another writer may be using (issue 33.2). Under the table lock, and
    only while its timeline holds no instant at all, no heartbeat runs and no other data source
    write has staged rows in it: then `hoodie.properties` goes first (from then on nobody opens
    the table, and a writer that opened it earlier finds it gone once it holds the lock,
    `Transaction.take_lock`) and the other files of `.hoodie/` but for the staging area, then,
    after the release, the lock files this clean-up saw, then the empty folders, each with an
    atomic removal of an empty directory (a file someone puts there meanwhile stays)."""
    from engine.errors import ConcurrentWriteError
    from engine.table.meta_client import PROPERTIES_PATH
    from engine.transaction.heartbeat import HEARTBEAT_DIR
    from engine.transaction.lock import TableLock

    storage = table.meta.storage
    ours = stage.rsplit("/", 1)[-1]
    lock = TableLock(storage, "remove the table of a failed first write")
    try:
        lock.acquire(wait=0)
    except ConcurrentWriteError:
        log.warning("kept the new table at %s: another writer holds its lock", storage.base_uri)
        return
    reason = None
    try:
        if table.meta.timeline().instants:
            reason = "its timeline holds an instant"
        elif [f for f in _names(storage, HEARTBEAT_DIR) if not f.startswith(".")]:
            reason = "a heartbeat runs"
        elif [n for n in _names(storage, ".hoodie/.temp") if n.startswith("datasource-") and n != ours]:
            reason = "another write has staged rows in it"
        else:
            storage.delete(PROPERTIES_PATH)
            # what the failed write left (a failed-write record, say): the table's own, nobody else's
            for info in storage.list_files_recursive(".hoodie"):
                if not info.path.startswith((".hoodie/.lock/", ".hoodie/.temp/")):
                    storage.delete(info.path)
    except EngineError as exc:
        reason = f"it could not be checked ({exc})"
    finally:
        locks = [f.path for f in storage.list_files_recursive(".hoodie/.lock")] if reason is None else []
        lock.release()
    if reason is not None:
        log.warning("kept the new table at %s: %s", storage.base_uri, reason)
        return
    for rel in locks:  # after the release, which writes to the lock file
        storage.delete(rel)
    storage.remove_empty_dirs(".hoodie")  # the writer removes its stage, and then the rest


def _names(storage, folder: str) -> list[str]:
    try:
        return [f.name for f in storage.list_dir(folder)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def check_conflicts(write: WriteOptions, cfg, path: str) -> None:
    """Refuse write options that state another record key, partitioning, ordering field, type or
    name than the table has (Apache Hudi refuses them too)."""
    conflicts = write.conflicts({
        "hoodie.datasource.write.recordkey.field": tuple(cfg.record_key_fields),
        "hoodie.datasource.write.partitionpath.field": tuple(cfg.partition_fields),
        "hoodie.datasource.write.precombine.field": cfg.precombine_field,
        "hoodie.datasource.write.table.type": cfg.table_type.value,
        "hoodie.table.name": cfg.name,
        "hoodie.table.cdc.enabled": cfg.cdc_mode is not None,
        "hoodie.table.cdc.supplemental.logging.mode": cfg.cdc_mode.value if cfg.cdc_mode else None,
    })
    if conflicts:
        raise InvalidConfigError(f"write options differ from the table at {path}: " + "; ".join(conflicts))
