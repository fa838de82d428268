"""Clustering plans: what a clustering rewrites, and the size-based planner that makes them.

Stored as Apache Hudi stores them: an Avro `HoodieRequestedReplaceMetadata` (`operationType`
CLUSTER, a `HoodieClusteringPlan`) in `T.replacecommit.requested` on table version 6 and in
`T.clustering.requested` on versions 8/9. Each input group lists its file slices (`HoodieSliceInfo`:
base file and log files by full path, as Hudi writes them) and how many file groups it becomes; the
strategy's parameters carry the sort columns. Executing a plan writes new file groups and completes
`T.replacecommit` naming the replaced ones (`engine.services.clustering`).

`plan_groups` is Apache Hudi's `SparkSizeBasedClusteringPlanStrategy` /
`PartitionAwareClusteringPlanStrategy`: per partition (after the partition filter), the latest slices
whose base file is under the small-file limit and whose group no pending compaction or clustering
holds, largest first, packed into groups of at most `max.bytes.per.group` bytes (a slice without a
base file counts as `hoodie.parquet.max.file.size`), each with ceil(bytes / target.file.max.bytes)
output groups; a group of one slice only when sorting or single-group clustering is on; at most
`max.num.groups` groups. Pure: sizes in, plan out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from engine.config.clustering_config import ClusteringConfig
from engine.errors import CorruptTableError
from engine.table.compaction_plan import TableFiles
from engine.timeline.instant import Action, Instant, State

MODEL = "HoodieRequestedReplaceMetadata"
OPERATION = "CLUSTER"
PLAN_VERSION = 1
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
MB = 1024 * 1024


@dataclass(frozen=True)
class SliceInput:
    """One file slice of a clustering input group (file names; the plan stores full paths)."""

    partition: str
    file_id: str
    base_file: str | None
    log_files: tuple[str, ...] = ()
    base_size: int = 0
    log_sizes: tuple[int, ...] = ()

    @property
    def base_path(self) -> str | None:
        return f"{self.partition}/{self.base_file}".lstrip("/") if self.base_file else None

    @property
    def log_paths(self) -> tuple[str, ...]:
        return tuple(f"{self.partition}/{n}".lstrip("/") for n in self.log_files)

    def to_record(self, uri: Callable[[str], str]) -> dict:
        return {
            "dataFilePath": uri(self.base_path) if self.base_path else "",
            "deltaFilePaths": [uri(p) for p in self.log_paths],
            "fileId": self.file_id,
            "partitionPath": self.partition,
            "bootstrapFilePath": "",
            "version": 1,
        }

    @classmethod
    def from_record(cls, record: Mapping) -> SliceInput:
        def name(value: str | None) -> str | None:
            return value.rstrip("/").rpartition("/")[2] if value else None

        if not record.get("fileId"):
            raise CorruptTableError(f"clustering slice without a file id: {dict(record)}")
        logs = tuple(n for n in (name(p) for p in record.get("deltaFilePaths") or []) if n)
        return cls(record.get("partitionPath") or "", record["fileId"], name(record.get("dataFilePath")), logs)


@dataclass(frozen=True)
class ClusteringGroup:
    """Slices of one partition rewritten together into `output_groups` new file groups (or more,
    when the data outgrows the target file size)."""

    slices: tuple[SliceInput, ...]
    output_groups: int = 1
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def partition(self) -> str:
        return self.slices[0].partition if self.slices else ""

    def to_record(self, uri: Callable[[str], str]) -> dict:
        return {
            "slices": [s.to_record(uri) for s in self.slices],
            "metrics": dict(self.metrics),
            "numOutputFileGroups": self.output_groups,
            "extraMetadata": None,
            "version": 1,
        }

    @classmethod
    def from_record(cls, record: Mapping) -> ClusteringGroup:
        slices = tuple(SliceInput.from_record(s) for s in record.get("slices") or [])
        return cls(slices, int(record.get("numOutputFileGroups") or 1), dict(record.get("metrics") or {}))


@dataclass(frozen=True)
class ClusteringPlan:
    """A clustering: its instant, input groups and the strategy's parameters (sort columns)."""

    instant: str
    groups: tuple[ClusteringGroup, ...]
    params: Mapping[str, str] = field(default_factory=dict)
    strategy_class: str = ""
    extra: Mapping[str, str] | None = None

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        return frozenset((s.partition, s.file_id) for g in self.groups for s in g.slices)

    @property
    def sort_columns(self) -> list[str]:
        return [c.strip() for c in (self.params.get(SORT_COLUMNS_PARAM) or "").split(",") if c.strip()]

    def to_record(self, uri: Callable[[str], str]) -> dict:
        from engine.config.clustering_config import SORT_AND_SIZE

        return {
            "operationType": OPERATION,
            "clusteringPlan": {
                "inputGroups": [g.to_record(uri) for g in self.groups],
                "strategy": {
                    "strategyClassName": self.strategy_class or SORT_AND_SIZE,
                    "strategyParams": dict(self.params),
                    "version": 1,
                },
                "extraMetadata": dict(self.extra or {}),
                "version": PLAN_VERSION,
                "preserveHoodieMetadata": True,
            },
            "extraMetadata": {},
            "version": 1,
        }

    @classmethod
    def from_record(cls, record: Mapping, instant: str) -> ClusteringPlan:
        if str(record.get("operationType") or "").upper() != OPERATION or not record.get("clusteringPlan"):
            raise CorruptTableError(f"instant {instant} does not hold a clustering plan")
        plan = record["clusteringPlan"]
        strategy = plan.get("strategy") or {}
        groups = tuple(ClusteringGroup.from_record(g) for g in plan.get("inputGroups") or [])
        return cls(instant, groups, dict(strategy.get("strategyParams") or {}),
                   strategy.get("strategyClassName") or "", plan.get("extraMetadata") or None)

    def to_doc(self) -> dict:
        return self.to_dict()

    def to_dict(self) -> dict:
        """The plan as JSON data (CLI `--json`, the console)."""
        return {
            "instant": self.instant,
            "sort_columns": self.sort_columns,
            "groups": [
                {
                    "partition": g.partition,
                    "output_groups": g.output_groups,
                    "input_bytes": sum(s.base_size + sum(s.log_sizes) for s in g.slices),
                    "slices": [
                        {"file_id": s.file_id, "base_file": s.base_file, "log_files": list(s.log_files)}
                        for s in g.slices
                    ],
                }
                for g in self.groups
            ],
        }


def requested_action(table_version: int) -> Action:
    """The action of a pending clustering: `replacecommit` on version 6, `clustering` on 8/9."""
    return Action.REPLACE_COMMIT if table_version < 8 else Action.CLUSTERING


def read_plan(meta: TableFiles, instant: str, action: Action) -> ClusteringPlan:
    """The plan in `instant`'s requested file (CorruptTableError when it is not a clustering)."""
    from engine.timeline import avro_models

    requested = Instant(instant, action, State.REQUESTED)
    data = meta.storage.read_bytes(meta.instant_path(requested))
    try:
        return ClusteringPlan.from_record(avro_models.deserialize(MODEL, data), instant)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.storage.uri(meta.instant_path(requested))}: {exc}") from exc


# ---- planning (pure) ----------------------------------------------------------------------------
def filter_partitions(partitions: Sequence[str], config: ClusteringConfig, now: datetime | None = None) -> list[str]:
    """The partitions a plan may take (`hoodie.clustering.plan.strategy.partition.selected`, else the
    regex, then the filter mode), as `ClusteringPlanPartitionFilter` selects them."""
    if config.partition_selected:
        chosen = [p for p in config.partition_selected.split(",") if p]
    else:
        chosen = list(partitions)
        if config.partition_regex:
            pattern = re.compile(config.partition_regex)
            chosen = [p for p in chosen if pattern.fullmatch(p)]
    mode = config.partition_filter_mode
    if mode == "RECENT_DAYS":
        ordered = sorted(chosen, reverse=True)
        skip = max(config.skip_from_latest, 0)
        limit = config.lookback_partitions if config.lookback_partitions > 0 else len(chosen)
        return ordered[skip: skip + limit]
    if mode == "SELECTED_PARTITIONS":
        if config.begin_partition is not None:
            chosen = [p for p in chosen if p >= config.begin_partition]
        if config.end_partition is not None:
            chosen = [p for p in chosen if p <= config.end_partition]
        return chosen
    if mode == "DAY_ROLLING":
        hour = (now or datetime.now()).hour
        return [p for i, p in enumerate(sorted(chosen)) if i % 24 == hour]
    return chosen


def metrics(slices: Iterable[SliceInput], default_base_size: int) -> dict[str, float]:
    """`FileSliceMetricUtils.addFileSliceCommonMetrics`."""
    logs = log_size = read = write = 0
    for s in slices:
        logs += len(s.log_files)
        log_size += sum(x for x in s.log_sizes if x >= 0)
        read += s.base_size
        write += s.base_size if s.base_size > 0 else default_base_size
    read_mb = (read + log_size) // MB
    write_mb = write // MB
    return {
        "TOTAL_IO_READ_MB": float(read_mb),
        "TOTAL_IO_WRITE_MB": float(write_mb),
        "TOTAL_IO_MB": float(read_mb + write_mb),
        "TOTAL_LOG_FILES_SIZE": float(log_size),
        "TOTAL_LOG_FILES": float(logs),
    }


def plan_partition(slices: Sequence[SliceInput], config: ClusteringConfig, max_file_size: int) -> list[ClusteringGroup]:
    """`buildClusteringGroupsForPartition`: the eligible slices of one partition, largest first,
    packed into groups."""
    def size(s: SliceInput) -> int:
        return s.base_size if s.base_file else max_file_size

    eligible = [s for s in slices if (s.base_size if s.base_file else 0) < config.small_file_limit]
    ordered = sorted(eligible, key=size, reverse=True)  # Java's List.sort is stable too
    groups: list[ClusteringGroup] = []
    current: list[SliceInput] = []
    total = 0

    def close() -> None:
        groups.append(ClusteringGroup(tuple(current), max(1, math.ceil(total / config.target_file_max_bytes)),
                                      metrics(current, max_file_size)))

    for s in ordered:
        if total + size(s) > config.max_bytes_per_group and current:
            close()
            current, total = [], 0
            if len(groups) >= config.max_num_groups:
                break
        current.append(s)
        total += size(s)
    else:
        if current and (len(current) > 1 or config.single_group or config.sort_column_list):
            close()
    return groups[: config.max_num_groups]


def plan_groups(
    slices_by_partition: Mapping[str, Sequence[SliceInput]],
    config: ClusteringConfig,
    max_file_size: int,
    now: datetime | None = None,
) -> list[ClusteringGroup]:
    """Every partition's groups (partitions in order), at most `max.num.groups` in all."""
    out: list[ClusteringGroup] = []
    for partition in filter_partitions(sorted(slices_by_partition), config, now):
        out.extend(plan_partition(slices_by_partition.get(partition, ()), config, max_file_size))
    return out[: config.max_num_groups]


__all__ = [
    "MODEL",
    "OPERATION",
    "SORT_COLUMNS_PARAM",
    "ClusteringGroup",
    "ClusteringPlan",
    "SliceInput",
    "filter_partitions",
    "metrics",
    "plan_groups",
    "plan_partition",
    "read_plan",
    "requested_action",
]
