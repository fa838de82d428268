"""`WriteConfig`: writer options (Apache Hudi key names), with defaults, parsed once, immutable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from engine.config.clustering_config import ClusteringConfig, is_clustering_option
from engine.config.values import parse_bool as _parse_bool
from engine.errors import InvalidConfigError

MB = 1024 * 1024
INDEX_OPTION_PREFIXES = ("hoodie.index.hbase.", "hoodie.record.index.")
# the timestamp-based key generator's options (engine.keygen.timestamp): they complete what a
# table's hoodie.properties lacks (Apache Hudi 0.x keeps only some of them there)
KEYGEN_OPTION_PREFIX = "hoodie.keygen.timebased."
# key generator options a write may give (engine.keygen.keys.KeySpec): a CustomKeyGenerator table of
# version 6 keeps its partition fields without their types, so its writers name them; the rendering
# of timestamp key values
KEYGEN_WRITE_OPTIONS = frozenset({
    "hoodie.datasource.write.partitionpath.field",
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled",
})

# option key -> (attribute, parser)
_KEYS: dict[str, tuple[str, type]] = {
    "hoodie.parquet.max.file.size": ("max_file_size", int),
    "hoodie.parquet.small.file.limit": ("small_file_limit", int),
    "hoodie.copyonwrite.record.size.estimate": ("record_size_estimate", int),
    "hoodie.parquet.compression.codec": ("compression", str),
    "hoodie.parquet.block.size": ("row_group_size_bytes", int),
    "hoodie.combine.before.upsert": ("combine_before_upsert", bool),
    "hoodie.combine.before.insert": ("combine_before_insert", bool),
    "hoodie.combine.before.delete": ("combine_before_delete", bool),
    "hoodie.upsert.shuffle.parallelism": ("shuffle_parallelism", int),
    "hoodie.index.type": ("index_type", str),
    "hoodie.index.bloom.num_entries": ("bloom_num_entries", int),
    "hoodie.index.bloom.fpp": ("bloom_fpp", float),
    "hoodie.bloom.index.filter.dynamic.max.entries": ("bloom_max_entries", int),
    "hoodie.record.size.estimation.threshold": ("record_size_estimation_threshold", float),
    "hoodie.index.update.partition.path": ("update_partition_path", bool),
    "hoodie.simple.index.update.partition.path": ("simple_update_partition_path", bool),
    "hoodie.bloom.index.update.partition.path": ("bloom_update_partition_path", bool),
    "hoodie.hbase.index.update.partition.path": ("hbase_update_partition_path", bool),
    "hoodie.record.index.update.partition.path": ("record_update_partition_path", bool),
    # merge-on-read (Apache Hudi's keys and defaults)
    "hoodie.logfile.data.block.format": ("log_block_format", str),
    "hoodie.merge.small.file.group.candidates.limit": ("small_file_candidates_limit", int),
    "hoodie.logfile.to.parquet.compression.ratio": ("log_to_parquet_ratio", float),
    "hoodie.compact.inline": ("compact_inline", bool),
    "hoodie.compact.inline.max.delta.commits": ("compact_max_delta_commits", int),
    "hoodie.metadata.compact.max.delta.commits": ("metadata_compact_max_delta_commits", int),
    # table services (Apache Hudi's keys and defaults)
    "hoodie.clean.automatic": ("clean_automatic", bool),
    "hoodie.cleaner.policy": ("cleaner_policy", str),
    "hoodie.cleaner.commits.retained": ("cleaner_commits_retained", int),
    "hoodie.cleaner.fileversions.retained": ("cleaner_file_versions_retained", int),
    "hoodie.archive.automatic": ("archive_automatic", bool),
    "hoodie.keep.min.commits": ("keep_min_commits", int),
    "hoodie.keep.max.commits": ("keep_max_commits", int),
    "hoodie.timeline.compaction.batch.size": ("timeline_compaction_batch_size", int),
    "hoodie.client.heartbeat.interval_in_ms": ("heartbeat_interval_ms", int),
    "hoodie.client.heartbeat.tolerable.misses": ("heartbeat_tolerable_misses", int),
    # the single-writer lock (ours: a lease renewed by the holder; wait 0 = fail at once)
    "hoodie.write.lock.lease_ms": ("lock_lease_ms", int),
    "hoodie.write.lock.wait_time_ms": ("lock_wait_ms", int),
    # SINGLE_WRITER (the table lock for the whole write) or OPTIMISTIC_CONCURRENCY_CONTROL (the
    # lock only to start and to commit; conflicts checked at commit: engine.transaction.conflicts)
    "hoodie.write.concurrency.mode": ("concurrency_mode", str),
    # Apache Hudi's metadata table: this engine does not write it (engine.table.metadata_table)
    "hoodie.metadata.enable": ("metadata_enable", bool),
    "hoodie.metadata.index.column.stats.enable": ("metadata_column_stats_enable", bool),
    # schema evolution: a batch lacking table columns writes them as nulls (Hudi 0.14.1+'s key, and
    # the older reconcile key, which has the same effect on the missing columns)
    "hoodie.write.set.null.for.missing.columns": ("set_null_for_missing_columns", bool),
    "hoodie.datasource.write.reconcile.schema": ("reconcile_schema", bool),
    # schema on read: a write to a table without an internal schema starts one (ids for its
    # columns, engine.schema.internal); tables that have one keep it up to date regardless
    "hoodie.schema.on.read.enable": ("schema_on_read", bool),
    # ours: plan a batch the driver can hold there and write it in one Spark job
    # (engine.write.one_job): auto (by Spark's size estimate of the input) | always | never
    "hoodie.write.driver.plan": ("driver_plan", str),
    "hoodie.write.driver.max.bytes": ("driver_max_bytes", int),
    # ours: write a batch planned on the driver there, on threads, with no Spark job
    # (engine.write.local): auto (when the batch plus the file slices it rewrites are within
    # hoodie.write.local.max.bytes) | always | never; threads: 0 = one per core
    "hoodie.write.local": ("local_mode", str),
    "hoodie.write.local.max.bytes": ("local_max_bytes", int),
    "hoodie.write.local.threads": ("local_threads", int),
    # bulk_insert (engine.write.bulk_stream): NONE / PARTITION_SORT write the input's partitions as
    # they are; PARTITION_PATH_REPARTITION_AND_SORT (ours by default) repartitions by partition path
    # first, so that each partition path is written by one task
    "hoodie.bulkinsert.sort.mode": ("bulk_insert_sort_mode", str),
    # table versions 4 and 5 (Apache Hudi 0.11-0.13): upgraded to 6 before the first write
    # (engine.table.upgrade), as Apache Hudi's writers do; false refuses the write instead
    "hoodie.write.auto.upgrade": ("auto_upgrade", bool),
    # the 4 -> 5 upgrade refuses a table with a partition named `default` (Hudi 0.11's null partition)
    "hoodie.skip.default.partition.validation": ("skip_default_partition_validation", bool),
}
DRIVER_PLAN_MODES = ("auto", "always", "never")
BULK_INSERT_SORT_MODES = ("NONE", "PARTITION_SORT", "PARTITION_PATH_REPARTITION_AND_SORT")
SINGLE_WRITER = "SINGLE_WRITER"
OPTIMISTIC = "OPTIMISTIC_CONCURRENCY_CONTROL"
CONCURRENCY_MODES = (SINGLE_WRITER, OPTIMISTIC)
# a writer under optimistic concurrency control waits this long for the lock to commit, unless
# hoodie.write.lock.wait_time_ms says otherwise (the lock is held for seconds, not for the write)
OCC_DEFAULT_LOCK_WAIT_MS = 60_000

CLEANER_POLICIES = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS")


@dataclass(frozen=True)
class WriteConfig:
    """Writer options. Build with `WriteConfig.from_options({"hoodie.parquet.max.file.size": ...})`."""

    max_file_size: int = 120 * MB
    small_file_limit: int = 100 * MB
    record_size_estimate: int = 1024
    compression: str = "snappy"
    row_group_size_bytes: int = 120 * MB
    combine_before_upsert: bool = True
    combine_before_insert: bool = False  # as in Apache Hudi
    combine_before_delete: bool = True
    shuffle_parallelism: int = 0  # 0: let the planner pick (one task per file group)
    index_type: str | None = None
    bloom_num_entries: int = 60_000
    bloom_fpp: float = 1e-9
    bloom_max_entries: int = 100_000
    # only commits that wrote more than threshold x small_file_limit bytes estimate the record size
    record_size_estimation_threshold: float = 1.0
    # global indexes, key found in another partition: delete there + insert here (True), or update
    # there (False). Apache Hudi's per-index keys and defaults (`update_partition_path_for`); the
    # generic `hoodie.index.update.partition.path`, when given, overrides them all
    update_partition_path: bool | None = None
    simple_update_partition_path: bool = True
    bloom_update_partition_path: bool = True
    hbase_update_partition_path: bool = False
    record_update_partition_path: bool = False

    # merge-on-read: data block format (parquet | avro), small-file candidates without log
    # indexing, log size weight in small-file sizing, inline compaction after N deltacommits
    log_block_format: str = "parquet"
    small_file_candidates_limit: int = 1
    log_to_parquet_ratio: float = 0.35
    compact_inline: bool = False
    compact_max_delta_commits: int = 5
    metadata_compact_max_delta_commits: int | None = None  # None: the metadata table's default (10)

    # table services after each commit, as in Apache Hudi (defaults are Hudi's)
    clean_automatic: bool = True
    cleaner_policy: str = "KEEP_LATEST_COMMITS"
    cleaner_commits_retained: int = 10
    cleaner_file_versions_retained: int = 3
    archive_automatic: bool = True
    keep_min_commits: int = 20
    keep_max_commits: int = 30
    # layout 2's LSM history: this many files of a layer are merged into one of the next
    timeline_compaction_batch_size: int = 10
    heartbeat_interval_ms: int = 60_000
    heartbeat_tolerable_misses: int = 2
    lock_lease_ms: int = 60_000
    lock_wait_ms: int | None = None  # None: 0 for a single writer, OCC_DEFAULT_LOCK_WAIT_MS under OCC
    concurrency_mode: str = SINGLE_WRITER
    # None/False: a metadata table Apache Hudi left is removed before writing; True: refused
    metadata_enable: bool | None = None
    metadata_column_stats_enable: bool | None = None  # build (true) or drop (false) the column statistics
    # both false (Apache Hudi's defaults): a batch must carry every table column
    set_null_for_missing_columns: bool = False
    reconcile_schema: bool = False
    schema_on_read: bool = False
    driver_plan: str = "auto"
    driver_max_bytes: int = 256 * MB
    local_mode: str = "auto"
    local_max_bytes: int = 512 * MB
    local_threads: int = 0
    bulk_insert_sort_mode: str = "PARTITION_PATH_REPARTITION_AND_SORT"
    auto_upgrade: bool = True
    skip_default_partition_validation: bool = False

    # settings of the index itself, passed through untouched (hoodie.index.hbase.*, hoodie.record.index.*)
    index_options: tuple[tuple[str, str], ...] = ()
    # hoodie.keygen.timebased.* and KEYGEN_WRITE_OPTIONS given with the write
    keygen_options: tuple[tuple[str, str], ...] = ()
    # hoodie.clustering.* and hoodie.layout.optimize.* (engine.config.clustering_config)
    clustering_options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.clustering  # noqa: B018  (a malformed clustering option is refused here)
        if self.max_file_size <= 0:
            raise InvalidConfigError("hoodie.parquet.max.file.size must be positive")
        if self.small_file_limit < 0:
            raise InvalidConfigError("hoodie.parquet.small.file.limit must not be negative")
        if self.bloom_num_entries <= 0 or not 0 < self.bloom_fpp < 1:
            raise InvalidConfigError("bloom filters need num_entries > 0 and 0 < fpp < 1")
        if self.cleaner_policy not in CLEANER_POLICIES:
            raise InvalidConfigError(
                f"hoodie.cleaner.policy must be one of {', '.join(CLEANER_POLICIES)}, not {self.cleaner_policy!r}"
            )
        if self.driver_plan not in DRIVER_PLAN_MODES:
            raise InvalidConfigError(
                f"hoodie.write.driver.plan must be one of {', '.join(DRIVER_PLAN_MODES)}, not {self.driver_plan!r}"
            )
        if self.local_mode not in DRIVER_PLAN_MODES:
            raise InvalidConfigError(
                f"hoodie.write.local must be one of {', '.join(DRIVER_PLAN_MODES)}, not {self.local_mode!r}"
            )
        if self.local_max_bytes < 0 or self.local_threads < 0:
            raise InvalidConfigError("hoodie.write.local.max.bytes and hoodie.write.local.threads must not be negative")
        object.__setattr__(self, "bulk_insert_sort_mode", self.bulk_insert_sort_mode.strip().upper())
        if self.bulk_insert_sort_mode not in BULK_INSERT_SORT_MODES:
            raise InvalidConfigError(
                f"hoodie.bulkinsert.sort.mode must be one of {', '.join(BULK_INSERT_SORT_MODES)} "
                f"(GLOBAL_SORT and PARTITION_PATH_REPARTITION are not implemented), not {self.bulk_insert_sort_mode!r}"
            )
        if self.cleaner_commits_retained < 1 or self.cleaner_file_versions_retained < 1:
            raise InvalidConfigError("hoodie.cleaner.commits.retained and fileversions.retained must be >= 1")
        if not self.cleaner_commits_retained < self.keep_min_commits < self.keep_max_commits:
            raise InvalidConfigError(
                "archival needs hoodie.cleaner.commits.retained < hoodie.keep.min.commits < hoodie.keep.max.commits "
                f"(got {self.cleaner_commits_retained}, {self.keep_min_commits}, {self.keep_max_commits})"
            )
        if self.timeline_compaction_batch_size < 2:
            raise InvalidConfigError("hoodie.timeline.compaction.batch.size must be at least 2")
        if self.heartbeat_interval_ms <= 0 or self.heartbeat_tolerable_misses < 1:
            raise InvalidConfigError("the heartbeat interval must be positive and tolerable misses >= 1")
        if self.lock_lease_ms <= 0 or (self.lock_wait_ms is not None and self.lock_wait_ms < 0):
            raise InvalidConfigError("hoodie.write.lock.lease_ms must be positive, wait_time_ms >= 0")
        object.__setattr__(self, "concurrency_mode", self.concurrency_mode.strip().upper())
        if self.concurrency_mode == "NON_BLOCKING_CONCURRENCY_CONTROL":
            raise InvalidConfigError(
                "hoodie.write.concurrency.mode=NON_BLOCKING_CONCURRENCY_CONTROL needs table version 8's "
                "completion-time file slicing and is not implemented; use OPTIMISTIC_CONCURRENCY_CONTROL"
            )
        if self.concurrency_mode not in CONCURRENCY_MODES:
            raise InvalidConfigError(
                f"hoodie.write.concurrency.mode must be one of {', '.join(CONCURRENCY_MODES)}, not {self.concurrency_mode!r}"
            )
        if self.record_size_estimate <= 0:
            raise InvalidConfigError("hoodie.copyonwrite.record.size.estimate must be positive")
        object.__setattr__(self, "log_block_format", self.log_block_format.strip().lower())
        if self.log_block_format not in ("parquet", "avro"):
            raise InvalidConfigError(
                f"hoodie.logfile.data.block.format must be parquet or avro, not {self.log_block_format!r}"
            )
        if self.small_file_candidates_limit < 0 or self.log_to_parquet_ratio < 0:
            raise InvalidConfigError(
                "hoodie.merge.small.file.group.candidates.limit and hoodie.logfile.to.parquet.compression.ratio "
                "must not be negative"
            )
        if self.metadata_compact_max_delta_commits is not None and self.metadata_compact_max_delta_commits < 1:
            raise InvalidConfigError(
                f"hoodie.metadata.compact.max.delta.commits={self.metadata_compact_max_delta_commits}: at least 1")
        if self.compact_max_delta_commits < 1:
            raise InvalidConfigError("hoodie.compact.inline.max.delta.commits must be >= 1")

    @property
    def clustering(self) -> ClusteringConfig:
        return ClusteringConfig.from_options(dict(self.clustering_options))

    def plans_on_driver(self, estimated_bytes: int | None) -> bool:
        """Whether a batch of about `estimated_bytes` (None: unknown) is planned on the driver and
        written in one Spark job (`hoodie.write.driver.plan`, `hoodie.write.driver.max.bytes`)."""
        if self.driver_plan == "never":
            return False
        if self.driver_plan == "always":
            return True
        return estimated_bytes is not None and estimated_bytes <= self.driver_max_bytes

    def writes_locally(self, touched_bytes: int) -> bool:
        """Whether a batch planned on the driver whose rows plus rewritten file slices come to
        `touched_bytes` is written by the driver's threads (`hoodie.write.local*`)."""
        if self.local_mode == "never":
            return False
        return self.local_mode == "always" or touched_bytes <= self.local_max_bytes

    @property
    def local_service_bytes(self) -> int:
        """What compaction and clustering read at most to run on the driver's threads rather than
        as Spark tasks (`hoodie.write.local.max.bytes`; `never`: 0, `always`: any size)."""
        if self.local_mode == "never":
            return 0
        return 2**62 if self.local_mode == "always" else self.local_max_bytes

    @property
    def optimistic(self) -> bool:
        """Whether writes run under optimistic concurrency control (several writers at once)."""
        return self.concurrency_mode == OPTIMISTIC

    @property
    def lock_wait_seconds(self) -> float:
        """How long to wait for the table lock: hoodie.write.lock.wait_time_ms, else 0 for a single
        writer (fail at once, naming the holder) and OCC_DEFAULT_LOCK_WAIT_MS under OCC."""
        if self.lock_wait_ms is not None:
            return self.lock_wait_ms / 1000
        return OCC_DEFAULT_LOCK_WAIT_MS / 1000 if self.optimistic else 0.0

    @property
    def fills_missing_columns(self) -> bool:
        """Whether a batch lacking table columns writes nulls for them (either option set)."""
        return self.set_null_for_missing_columns or self.reconcile_schema

    def update_partition_path_for(self, index_name: str) -> bool:
        """Whether a global index moves a record whose partition value changed (True: delete it in
        the old partition, insert it in the new one) or updates it in place (False).

        Apache Hudi's defaults: `hoodie.simple.index.update.partition.path` and
        `hoodie.bloom.index.update.partition.path` true, `hoodie.hbase.index.update.partition.path`
        and `hoodie.record.index.update.partition.path` false; `hoodie.index.update.partition.path`
        overrides them all."""
        if self.update_partition_path is not None:
            return self.update_partition_path
        family = index_name.upper().removeprefix("GLOBAL_")
        return {
            "SIMPLE": self.simple_update_partition_path,
            "BLOOM": self.bloom_update_partition_path,
            "HBASE": self.hbase_update_partition_path,
            "RECORD": self.record_update_partition_path,
        }.get(family, True)

    @classmethod
    def from_options(cls, options: Mapping[str, object] | None = None) -> WriteConfig:
        values: dict[str, object] = {}
        known = {f.name for f in fields(cls)}
        passthrough = []
        keygen = []
        clustering = []
        for key, raw in (options or {}).items():
            if is_clustering_option(key):
                clustering.append((key, str(raw)))
                continue
            if key.startswith(INDEX_OPTION_PREFIXES) and key not in _KEYS:
                passthrough.append((key, str(raw)))
                continue
            if key.startswith(KEYGEN_OPTION_PREFIX) or key in KEYGEN_WRITE_OPTIONS:
                keygen.append((key, str(raw)))
                continue
            if key in _KEYS:
                attr, kind = _KEYS[key]
            elif key in known:
                attr, kind = key, type(getattr(cls, key, "")) if key != "index_type" else str
            else:
                raise InvalidConfigError(f"unknown write option {key!r}")
            try:
                values[attr] = _parse_bool(raw) if kind is bool else kind(raw)
            except (TypeError, ValueError) as exc:
                raise InvalidConfigError(f"bad value for {key}: {raw!r}") from exc
        values["keygen_options"] = tuple(sorted(keygen))
        values["clustering_options"] = tuple(sorted(clustering))
        return cls(**values, index_options=tuple(sorted(passthrough)))  # type: ignore[arg-type]
