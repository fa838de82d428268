"""`ClusteringConfig`: Apache Hudi's clustering and layout options (`hoodie.clustering.*`,
`hoodie.layout.optimize.*`), with Hudi's defaults (`HoodieClusteringConfig`), parsed once, immutable.

Pure: no I/O. `WriteConfig` collects the options under these prefixes and builds this from them, so
an unknown or malformed clustering option is refused before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.config.values import parse_bool
from engine.errors import InvalidConfigError

PREFIXES = ("hoodie.clustering.", "hoodie.layout.optimize.")
_STRATEGY = "hoodie.clustering.plan.strategy."
SIZE_BASED_PLAN = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"
SORT_AND_SIZE = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
REJECT_UPDATES = "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy"
ALLOW_UPDATES = "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"
# plan strategies this engine plans as the size-based one does (Hudi maps the deprecated ones to it
# with a partition filter mode: ClusteringPlanStrategy.checkAndGetClusteringPlanStrategy)
_PLANS = {
    SIZE_BASED_PLAN: None,
    "org.apache.hudi.client.clustering.plan.strategy.JavaSizeBasedClusteringPlanStrategy": None,
    "org.apache.hudi.client.clustering.plan.strategy.SparkRecentDaysClusteringPlanStrategy": "RECENT_DAYS",
    "org.apache.hudi.client.clustering.plan.strategy.SparkSelectedPartitionsClusteringPlanStrategy": "SELECTED_PARTITIONS",
}
_EXECUTIONS = (SORT_AND_SIZE, "org.apache.hudi.client.clustering.run.strategy.JavaSortAndSizeExecutionStrategy")
LINEAR, ZORDER, HILBERT = "linear", "z-order", "hilbert"
LAYOUT_STRATEGIES = (LINEAR, ZORDER, HILBERT)
BUILD_METHODS = ("direct", "sample")
FILTER_MODES = ("NONE", "RECENT_DAYS", "SELECTED_PARTITIONS", "DAY_ROLLING")
MB = 1024 * 1024

# option -> (attribute, parser)
_KEYS: dict[str, tuple[str, type]] = {
    "hoodie.clustering.plan.strategy.class": ("plan_strategy_class", str),
    "hoodie.clustering.execution.strategy.class": ("execution_strategy_class", str),
    _STRATEGY + "small.file.limit": ("small_file_limit", int),
    _STRATEGY + "max.bytes.per.group": ("max_bytes_per_group", int),
    _STRATEGY + "target.file.max.bytes": ("target_file_max_bytes", int),
    _STRATEGY + "max.num.groups": ("max_num_groups", int),
    _STRATEGY + "single.group.clustering.enabled": ("single_group", bool),
    _STRATEGY + "sort.columns": ("sort_columns", str),
    _STRATEGY + "daybased.lookback.partitions": ("lookback_partitions", int),
    _STRATEGY + "daybased.skipfromlatest.partitions": ("skip_from_latest", int),
    _STRATEGY + "cluster.begin.partition": ("begin_partition", str),
    _STRATEGY + "cluster.end.partition": ("end_partition", str),
    _STRATEGY + "partition.regex.pattern": ("partition_regex", str),
    _STRATEGY + "partition.selected": ("partition_selected", str),
    "hoodie.clustering.plan.partition.filter.mode": ("partition_filter_mode", str),
    "hoodie.clustering.inline": ("inline", bool),
    "hoodie.clustering.inline.max.commits": ("inline_max_commits", int),
    "hoodie.clustering.schedule.inline": ("schedule_inline", bool),
    "hoodie.clustering.async.enabled": ("async_enabled", bool),
    "hoodie.clustering.async.max.commits": ("async_max_commits", int),
    "hoodie.clustering.updates.strategy": ("updates_strategy", str),
    "hoodie.clustering.rollback.pending.replacecommit.on.conflict": ("rollback_pending_on_conflict", bool),
    # Spark parallelism knobs of Hudi's executor: accepted; here one task per clustering group
    "hoodie.clustering.max.parallelism": ("max_parallelism", int),
    "hoodie.clustering.group.read.parallelism": ("group_read_parallelism", int),
    "hoodie.layout.optimize.strategy": ("layout_strategy", str),
    "hoodie.layout.optimize.curve.build.method": ("curve_build_method", str),
    "hoodie.layout.optimize.build.curve.sample.size": ("curve_sample_size", int),
}


@dataclass(frozen=True)
class ClusteringConfig:
    """Clustering options. Build with `ClusteringConfig.from_options({...})`."""

    plan_strategy_class: str = SIZE_BASED_PLAN
    execution_strategy_class: str = SORT_AND_SIZE
    small_file_limit: int = 300 * MB
    max_bytes_per_group: int = 2048 * MB
    target_file_max_bytes: int = 1024 * MB
    max_num_groups: int = 30
    single_group: bool = True
    sort_columns: str | None = None
    lookback_partitions: int = 2
    skip_from_latest: int = 0
    begin_partition: str | None = None
    end_partition: str | None = None
    partition_regex: str | None = None
    partition_selected: str | None = None
    partition_filter_mode: str = "NONE"
    inline: bool = False
    inline_max_commits: int = 4
    schedule_inline: bool = False
    async_enabled: bool = False
    async_max_commits: int = 4
    updates_strategy: str = REJECT_UPDATES
    rollback_pending_on_conflict: bool = False
    max_parallelism: int = 15
    group_read_parallelism: int = 20
    layout_strategy: str = "linear"
    curve_build_method: str = "direct"
    curve_sample_size: int = 200_000

    def __post_init__(self) -> None:
        if self.plan_strategy_class not in _PLANS:
            raise InvalidConfigError(
                f"hoodie.clustering.plan.strategy.class={self.plan_strategy_class}: this engine plans with "
                f"{SIZE_BASED_PLAN} (and the deprecated recent-days and selected-partitions strategies)"
            )
        if self.execution_strategy_class not in _EXECUTIONS:
            raise InvalidConfigError(
                f"hoodie.clustering.execution.strategy.class={self.execution_strategy_class}: this engine runs {SORT_AND_SIZE}"
            )
        if self.updates_strategy not in (REJECT_UPDATES, ALLOW_UPDATES):
            raise InvalidConfigError(
                f"hoodie.clustering.updates.strategy={self.updates_strategy}: this engine rejects updates to file "
                f"groups a pending clustering holds ({REJECT_UPDATES}) or lets them in ({ALLOW_UPDATES})"
            )
        if self.async_enabled:
            raise InvalidConfigError(
                "hoodie.clustering.async.enabled=true: this engine has no background clustering service; schedule and run "
                "clustering with Maintenance.cluster or `hoodie clustering run`, or inline with hoodie.clustering.inline"
            )
        mode = self.partition_filter_mode.strip().upper()
        if mode not in FILTER_MODES:
            raise InvalidConfigError(
                f"hoodie.clustering.plan.partition.filter.mode must be one of {', '.join(FILTER_MODES)}, not {self.partition_filter_mode!r}"
            )
        object.__setattr__(self, "partition_filter_mode", _PLANS[self.plan_strategy_class] or mode)
        for name in ("small_file_limit", "max_bytes_per_group", "target_file_max_bytes", "max_num_groups",
                     "inline_max_commits", "curve_sample_size"):
            if getattr(self, name) < 1:
                raise InvalidConfigError(f"{_key(name)} must be at least 1, not {getattr(self, name)}")
        if self.partition_regex:
            import re

            try:
                re.compile(self.partition_regex)
            except re.error as exc:
                raise InvalidConfigError(f"{_key('partition_regex')}={self.partition_regex!r}: {exc}") from exc
        object.__setattr__(self, "layout_strategy", layout_strategy(self.layout_strategy))
        object.__setattr__(self, "curve_build_method", curve_build_method(self.curve_build_method))

    @property
    def lets_updates_in(self) -> bool:
        """Apache Hudi's SparkAllowUpdateStrategy without rolling back: a write updates a pending
        clustering's file groups, and that clustering then refuses to run (the plan is stale)."""
        return self.updates_strategy == ALLOW_UPDATES and not self.rollback_pending_on_conflict

    @property
    def rolls_back_on_update(self) -> bool:
        """SparkAllowUpdateStrategy with hoodie.clustering.rollback.pending.replacecommit.on.conflict:
        a write that updates a pending clustering's file groups rolls that clustering back first."""
        return self.updates_strategy == ALLOW_UPDATES and self.rollback_pending_on_conflict

    @property
    def sort_column_list(self) -> list[str]:
        return [c.strip() for c in (self.sort_columns or "").split(",") if c.strip()]

    @classmethod
    def from_options(cls, options: Mapping[str, object] | None = None) -> ClusteringConfig:
        values: dict[str, object] = {}
        for key, raw in (options or {}).items():
            if key not in _KEYS:
                raise InvalidConfigError(f"unknown clustering option {key!r}")
            attr, kind = _KEYS[key]
            try:
                values[attr] = parse_bool(raw) if kind is bool else kind(raw)
            except (TypeError, ValueError) as exc:
                raise InvalidConfigError(f"bad value for {key}: {raw!r}") from exc
        return cls(**values)  # type: ignore[arg-type]


def layout_strategy(value: str) -> str:
    """`hoodie.layout.optimize.strategy` as Hudi resolves it (case-insensitive; `zorder` too)."""
    v = str(value).strip().lower().replace("_", "-")
    if v == "zorder":
        v = ZORDER
    if v not in LAYOUT_STRATEGIES:
        raise InvalidConfigError(
            f"hoodie.layout.optimize.strategy must be one of {', '.join(LAYOUT_STRATEGIES)}, not {value!r}")
    return v


def curve_build_method(value: str) -> str:
    v = str(value).strip().lower()
    if v not in BUILD_METHODS:
        raise InvalidConfigError(
            f"hoodie.layout.optimize.curve.build.method must be one of {', '.join(BUILD_METHODS)}, not {value!r}")
    return v


def _key(attr: str) -> str:
    return next(k for k, (a, _) in _KEYS.items() if a == attr)


def is_clustering_option(key: str) -> bool:
    return key.startswith(PREFIXES)


__all__ = [
    "ALLOW_UPDATES","BUILD_METHODS", "FILTER_MODES", "LAYOUT_STRATEGIES", "curve_build_method", "layout_strategy", "PREFIXES", "SIZE_BASED_PLAN", "SORT_AND_SIZE", "ClusteringConfig", "is_clustering_option"]
