"""HBASE index (global): record key → (commit time, file id, partition) rows in an HBase table.

Layout as in Apache Hudi's HBase index: one HBase row per record key, column family `_s` with
qualifiers `commit_ts`, `file_name` (holds the file id) and `partition_path`, one version.
The table is reached through the HBase Thrift1 server with happybase (an optional dependency,
imported only where a connection is opened).

- `tag_location`: Spark tasks look the incoming keys up with batched multi-row Gets; an entry
  whose `commit_ts` is not visible on the timeline (not a completed instant, and not older than
  the active timeline when older instants were archived) is ignored, so an entry left by a failed
  or rolled-back write is harmless. `rollback_commit` re-puts the locations a rolled-back write
  deleted or moved (from the slices that become current again) and removes its inserts' entries.
- `update_location`: Spark tasks Put the new locations of inserted records and Delete the keys
  of deleted ones, in batches, under a per-task share of the per-region-server rate limit.

Options (Apache Hudi's names where Hudi has one):
  hoodie.index.hbase.thrift.host        default: env HBASE_THRIFT_HOST
  hoodie.index.hbase.thrift.port        default: env HBASE_THRIFT_PORT, else 9090
  hoodie.index.hbase.thrift.transport   buffered | framed (default buffered)
  hoodie.index.hbase.thrift.protocol    binary | compact (default binary)
  hoodie.index.hbase.thrift.timeout.ms  socket timeout (default 10000)
  hoodie.index.hbase.table              default hudi_index_<table name>
  hoodie.index.hbase.get.batch.size     keys per Get round trip (default 100)
  hoodie.index.hbase.put.batch.size     rows per mutation round trip (default 100)
  hoodie.index.hbase.max.qps.per.region.server  operations per second (default 10000), shared
                                                evenly by the tasks of one Spark job
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL, PREV_FILE_ID_COL
from engine.data.keys import KEYS_SCHEMA
from engine.errors import EngineError, InvalidConfigError, StorageError
from engine.index.base import Index, RollbackChange, TagContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.table.meta_client import MetaClient

FAMILY = b"_s"
COMMIT_TS = b"_s:commit_ts"
FILE_NAME = b"_s:file_name"
PARTITION_PATH = b"_s:partition_path"
COLUMNS = [COMMIT_TS, FILE_NAME, PARTITION_PATH]

# `update_location` input: the written records' final locations (KEY_COL, PART_COL, FILE_ID_COL, OP_COL)
# plus, optionally, PREV_FILE_ID_COL: the file id `tag_location` found (null for a new key). A row
# whose file id did not change needs no Put (and must not get one: re-stamping commit_ts with an
# instant that might roll back would make the key look new afterwards)

STAT_NAMES = ("keys", "found", "ignored_uncommitted")

OPTION_PREFIX = "hoodie.index.hbase."
_TABLE_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")

_T = TypeVar("_T")


def batched(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """Consecutive lists of at most `size` items (the last may be shorter; none when empty)."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    chunk: list[_T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class TokenBucket:
    """Rate limit: `acquire(n)` blocks until n operations fit in `rate` per second.

    The bucket starts full (`burst` tokens, default one second's worth); a request bigger than
    what is left waits for the shortfall. `clock` and `sleep` are injectable for tests.
    """

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = float(rate)
        self.capacity = float(burst if burst is not None else rate)
        self.tokens = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    def acquire(self, n: int = 1) -> float:
        """Take `n` tokens, sleeping as long as needed; return the seconds slept."""
        now = self._clock()
        self.tokens = min(self.capacity, self.tokens + (now - self._last) * self.rate)
        self._last = now
        self.tokens -= n
        if self.tokens >= 0:
            return 0.0
        wait = -self.tokens / self.rate
        self._sleep(wait)
        self.tokens = 0.0
        self._last = self._clock()
        return wait


def _positive_int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise InvalidConfigError(f"{key} must be an integer, got {raw!r}") from exc
    if value < 1:
        raise InvalidConfigError(f"{key} must be >= 1, got {value}")
    return value


def _choice(options: Mapping[str, str], key: str, allowed: tuple[str, ...]) -> str:
    value = str(options.get(key) or allowed[0]).strip().lower()
    if value not in allowed:
        raise InvalidConfigError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    return value


@dataclass(frozen=True)
class HBaseSettings:
    """Where and how to reach the index table; parsed once from options (picklable, shipped to tasks)."""

    host: str
    port: int = 9090
    table: str | None = None  # None: hudi_index_<table name>
    transport: str = "buffered"
    protocol: str = "binary"
    timeout_ms: int = 10_000
    get_batch_size: int = 100
    put_batch_size: int = 100
    max_qps: int = 10_000

    @classmethod
    def from_options(cls, options: Mapping[str, str], env: Mapping[str, str] | None = None) -> HBaseSettings:
        """Parse `hoodie.index.hbase.*` options; host/port fall back to HBASE_THRIFT_HOST/PORT in `env`."""
        env = os.environ if env is None else env
        p = OPTION_PREFIX
        host = str(options.get(p + "thrift.host") or env.get("HBASE_THRIFT_HOST") or "").strip()
        if not host:
            raise InvalidConfigError(
                f"the HBASE index needs {p}thrift.host (or the HBASE_THRIFT_HOST environment variable)"
            )
        port_options = {p + "thrift.port": options.get(p + "thrift.port") or env.get("HBASE_THRIFT_PORT") or ""}
        table = str(options.get(p + "table") or "").strip() or None
        return cls(
            host=host,
            port=_positive_int(port_options, p + "thrift.port", 9090),
            table=table,
            transport=_choice(options, p + "thrift.transport", ("buffered", "framed")),
            protocol=_choice(options, p + "thrift.protocol", ("binary", "compact")),
            timeout_ms=_positive_int(options, p + "thrift.timeout.ms", 10_000),
            get_batch_size=_positive_int(options, p + "get.batch.size", 100),
            put_batch_size=_positive_int(options, p + "put.batch.size", 100),
            max_qps=_positive_int(options, p + "max.qps.per.region.server", 10_000),
        )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def table_name(self, hudi_table: str) -> str:
        """The HBase table: the configured one, else `hudi_index_<table name>` with characters
        HBase rejects in a table name replaced by `_`."""
        return self.table or "hudi_index_" + _TABLE_CHARS.sub("_", hudi_table)

    def task_qps(self, tasks: int) -> float:
        """Each of `tasks` concurrent tasks gets an even share of the per-server limit."""
        return max(1.0, self.max_qps / max(1, tasks))

    def connect(self) -> Any:
        """A happybase connection (raises the transport's error when the server is unreachable)."""
        import happybase

        return happybase.Connection(
            self.host, self.port, timeout=self.timeout_ms, transport=self.transport, protocol=self.protocol
        )


def is_valid_commit(commit_ts: str, completed: frozenset[str], archived_before: str | None) -> bool:
    """Whether an index entry written by `commit_ts` counts: its instant completed, or it predates
    the active timeline (`archived_before`: the first instant, when older ones were archived)."""
    return commit_ts in completed or (archived_before is not None and commit_ts < archived_before)


def lookup_rows(
    rows: Iterable[tuple[bytes, Mapping[bytes, bytes]]], valid: Callable[[str], bool], counts: dict[str, int]
) -> tuple[list[str], list[str], list[str]]:
    """(keys, partitions, file ids) of the HBase `rows` whose entry is complete and valid."""
    keys: list[str] = []
    parts: list[str] = []
    fids: list[str] = []
    for row_key, cells in rows:
        commit, fid, part = cells.get(COMMIT_TS), cells.get(FILE_NAME), cells.get(PARTITION_PATH)
        if commit is None or fid is None or part is None or not valid(commit.decode()):
            counts["ignored_uncommitted"] += 1
            continue
        keys.append(row_key.decode())
        parts.append(part.decode())
        fids.append(fid.decode())
    counts["found"] += len(keys)
    return keys, parts, fids


def _unreachable(settings: HBaseSettings, exc: BaseException) -> StorageError:
    return StorageError(f"HBase index unreachable at {settings.address}: {type(exc).__name__}: {exc}")


def _lookup_task(settings: HBaseSettings, table_name: str, timeline: Any, counts: Any, tasks: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        completed, archived_before = timeline.value

        def valid(ts: str) -> bool:
            return is_valid_commit(ts, completed, archived_before)

        local = dict.fromkeys(STAT_NAMES, 0)
        bucket = TokenBucket(settings.task_qps(tasks))
        try:
            conn = settings.connect()
        except Exception as exc:
            raise _unreachable(settings, exc) from exc
        try:
            table = conn.table(table_name)
            for batch in batches:
                for chunk in batched(batch.column(0).to_pylist(), settings.get_batch_size):
                    local["keys"] += len(chunk)
                    bucket.acquire(len(chunk))
                    found = table.rows([k.encode() for k in chunk], columns=COLUMNS)
                    keys, parts, fids = lookup_rows(found, valid, local)
                    if keys:
                        yield pa.RecordBatch.from_arrays(
                            [pa.array(keys, pa.string()), pa.array(parts, pa.string()), pa.array(fids, pa.string())],
                            schema=KEYS_SCHEMA,
                        )
        finally:
            conn.close()
        counts.add(local)

    return run


UPDATE_STATS_SCHEMA = pa.schema([pa.field("puts", pa.int64()), pa.field("deletes", pa.int64())])


def plan_mutations(rows: Iterable[tuple[str, str, str | None, str, Any]]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Puts (key, partition, file id) and deletes (key) for located rows
    (key, partition, file id, op, previous file id or `...` when unknown).

    A "U" row gets a Put unless its file id equals the previous one (location unchanged). A "D"
    row gets a Delete unless the same key also gets a Put (a record moved to another partition
    is deleted in the old one and inserted in the new one: the entry must follow it).
    """
    puts: list[tuple[str, str, str]] = []
    put_keys: set[str] = set()
    deletes: dict[str, None] = {}
    for key, part, fid, op, prev in rows:
        if op == OP_DELETE:
            deletes[key] = None
        elif op == OP_UPSERT and fid is not None and (prev is ... or prev is None or prev != fid):
            puts.append((key, part, fid))
            put_keys.add(key)
    return puts, [k for k in deletes if k not in put_keys]


def _update_task(settings: HBaseSettings, table_name: str, instant: str, tasks: int, has_prev: bool):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows: list[tuple[str, str, str | None, str, Any]] = []
        for batch in batches:
            cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            prevs = cols[4] if has_prev else [...] * batch.num_rows
            rows.extend(zip(cols[0], cols[1], cols[2], cols[3], prevs, strict=True))
        # a key's rows all sit in this task (the input is partitioned by key)
        puts, deletes = plan_mutations(rows)
        if puts or deletes:
            bucket = TokenBucket(settings.task_qps(tasks))
            try:
                conn = settings.connect()
            except Exception as exc:
                raise _unreachable(settings, exc) from exc
            try:
                table = conn.table(table_name)
                stamp = instant.encode()
                for chunk in batched(puts, settings.put_batch_size):
                    bucket.acquire(len(chunk))
                    with table.batch() as b:
                        for key, part, fid in chunk:
                            b.put(key.encode(), {COMMIT_TS: stamp, FILE_NAME: fid.encode(), PARTITION_PATH: part.encode()})
                for dchunk in batched(deletes, settings.put_batch_size):
                    bucket.acquire(len(dchunk))
                    with table.batch() as b:
                        for key in dchunk:
                            b.delete(key.encode(), columns=[FAMILY])
            finally:
                conn.close()
        yield pa.RecordBatch.from_arrays(
            [pa.array([len(puts)], pa.int64()), pa.array([len(deletes)], pa.int64())], schema=UPDATE_STATS_SCHEMA
        )

    return run


class HBaseIndex(Index):
    """Global index kept in an HBase table, looked up and updated from Spark tasks."""

    name = "HBASE"
    is_global = True
    wants_locations = True
    can_index_log_files = True

    def __init__(self, options: Mapping[str, str] | None = None, table_name: str | None = None) -> None:
        """`options`: the writer options (`hoodie.index.hbase.*`); `table_name`: the Hudi table's
        name, for the default HBase table name (else taken from the table at first use)."""
        self.settings = HBaseSettings.from_options(options or {})
        self.hudi_table = table_name
        self._counts: Any = None
        self.last_update: dict[str, int] = {}

    def hbase_table(self, meta: MetaClient | None = None) -> str:
        """The HBase table holding this index."""
        hudi_table = self.hudi_table or (meta.config.name if meta is not None else None)
        if self.settings.table is None and not hudi_table:
            raise InvalidConfigError(f"the HBASE index needs {OPTION_PREFIX}table or the Hudi table's name")
        return self.settings.table_name(hudi_table or "")

    def check_reachable(self, meta: MetaClient | None = None) -> str:
        """Connect, create the index table (family `_s`, one version) if missing; return its name.

        Raises StorageError when the server cannot be reached or the table is disabled; call it
        before any data file is written.
        """
        name = self.hbase_table(meta)
        try:
            conn = self.settings.connect()
        except Exception as exc:
            raise _unreachable(self.settings, exc) from exc
        try:
            if name.encode() not in conn.tables():
                try:
                    conn.create_table(name, {FAMILY.decode(): {"max_versions": 1}})
                except Exception as exc:  # another writer may have created it meanwhile
                    if type(exc).__name__ != "AlreadyExists":
                        raise
            if not conn.is_table_enabled(name):
                raise StorageError(f"HBase index table {name} at {self.settings.address} is disabled")
        except EngineError:
            raise
        except Exception as exc:
            raise _unreachable(self.settings, exc) from exc
        finally:
            conn.close()
        return name

    def check_available(self) -> None:
        """The contract's early check (see `check_reachable`); needs the table name given at construction
        (or `hoodie.index.hbase.table`)."""
        self.check_reachable()

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        """`records` + FILE_ID_COL and EXISTING_PART_COL: the file id and partition holding each key,
        null for keys the index does not know or whose entry's commit is not visible."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from engine.index.spark_tagging import CountsParam, join_existing

        timeline = ctx.meta.timeline()
        visible = (timeline.completed_write_times, timeline.archived_before)
        sc = ctx.spark.sparkContext
        shared = sc.broadcast(visible)
        self._counts = sc.accumulator(dict.fromkeys(STAT_NAMES, 0), CountsParam())
        keys = records.select(KEY_COL)
        tasks = max(1, min(keys.rdd.getNumPartitions(), sc.defaultParallelism))
        task = _lookup_task(self.settings, self.hbase_table(ctx.meta), shared, self._counts, tasks)
        existing = keys.mapInArrow(task, from_arrow_schema(KEYS_SCHEMA))
        # small batches (keys shipped to tasks) find few enough rows to broadcast, as bloom does
        return join_existing(records, existing, True, small=ctx.incoming_keys is not None)

    def tagging_stats(self) -> dict[str, int]:
        """Keys looked up, found, and entries ignored (commit not visible) by the last tagging."""
        return dict(self._counts.value) if self._counts is not None else {}

    def update_stats(self) -> dict[str, int]:
        """Puts and deletes of the last `update_location`."""
        return dict(self.last_update)

    def update_location(self, ctx: TagContext, instant: str, located: DataFrame) -> None:
        """Put the new locations and delete the removed keys of the records written by `instant`.

        `located`: a DataFrame with KEY_COL, PART_COL, FILE_ID_COL (the file id written), OP_COL
        ("U"/"D") and optionally PREV_FILE_ID_COL (the file id tagging found). Without the latter
        every "U" row is Put, re-stamping unchanged entries with `instant`.
        """
        from pyspark.sql import DataFrame
        from pyspark.sql.pandas.types import from_arrow_schema

        written: Any = located
        if not isinstance(written, DataFrame):
            raise TypeError(
                "the HBASE index needs the located records (a DataFrame with "
                f"{KEY_COL}, {PART_COL}, {FILE_ID_COL}, {OP_COL}), not write outcomes"
            )
        missing = [c for c in (KEY_COL, PART_COL, FILE_ID_COL, OP_COL) if c not in written.columns]
        if missing:
            raise TypeError(f"located records lack column(s) {', '.join(missing)}")
        has_prev = PREV_FILE_ID_COL in written.columns
        cols = [KEY_COL, PART_COL, FILE_ID_COL, OP_COL] + ([PREV_FILE_ID_COL] if has_prev else [])
        tasks = max(1, ctx.spark.sparkContext.defaultParallelism)
        by_key = written.select(*cols).repartition(tasks, KEY_COL)
        task = _update_task(self.settings, self.hbase_table(ctx.meta), instant, tasks, has_prev)
        try:
            stats = by_key.mapInArrow(task, from_arrow_schema(UPDATE_STATS_SCHEMA)).collect()
        except Exception as exc:
            raise StorageError(
                f"updating the HBase index at {self.settings.address} for instant {instant} failed: {exc}"
            ) from exc
        self.last_update = {
            "puts": sum(r["puts"] for r in stats),
            "deletes": sum(r["deletes"] for r in stats),
        }

    def rollback_commit(
        self, meta: MetaClient, instant: str, change: RollbackChange | None = None, final: bool = True
    ) -> None:
        """Point the keys a rolled-back instant deleted or moved back at the slices that are
        current again, and delete the entries of keys it inserted.

        Entries stamped with the rolled-back instant would be ignored anyway (not a completed
        instant), but a key the instant *deleted* has no entry left at all: without the Put it would
        look new and the next upsert would duplicate it. Done from the driver, rate-limited.
        """
        if change is None or (change.removed.num_rows == 0 and change.restored.num_rows == 0):
            return
        restored = change.restored.to_pylist()
        keep = {r["key"] for r in restored}
        removed = [k for k in change.removed.column("key").to_pylist() if k not in keep]
        bucket = TokenBucket(self.settings.task_qps(1))
        try:
            conn = self.settings.connect()
            table = conn.table(self.hbase_table(meta))
        except Exception as exc:
            raise _unreachable(self.settings, exc) from exc
        try:
            for chunk in batched(restored, self.settings.put_batch_size):
                bucket.acquire(len(chunk))
                with table.batch() as b:
                    for r in chunk:
                        b.put(
                            r["key"].encode(),
                            {
                                COMMIT_TS: r["commit_time"].encode(),
                                FILE_NAME: r["file_id"].encode(),
                                PARTITION_PATH: r["partition"].encode(),
                            },
                        )
            for dchunk in batched(removed, self.settings.put_batch_size):
                bucket.acquire(len(dchunk))
                with table.batch() as b:
                    for key in dchunk:
                        b.delete(key.encode(), columns=[FAMILY])
        except Exception as exc:
            raise StorageError(
                f"reverting the HBase index at {self.settings.address} for rolled-back instant {instant} failed: {exc}"
            ) from exc
        finally:
            conn.close()
