"""`Maintenance`'s clustering services (`engine.services.clustering`): schedule, run (under the table
lock, or beside optimistic writers), list the pending plans. A mixin of `Maintenance`, kept apart
to keep that module small."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.config.write_config import WriteConfig
    from engine.index.base import Index
    from engine.services.clustering import ClusteringResult
    from engine.services.transaction import Transaction
    from engine.table.clustering_plan import ClusteringPlan
    from engine.table.meta_client import MetaClient
    from engine.timeline.instant import Action


class _Host(Protocol):
    """What the services need of `Maintenance`."""

    meta: MetaClient
    config: WriteConfig

    def _index(self) -> Index: ...
    def _tx(self, purpose: str, index: Index | None, service: bool = True) -> Transaction: ...
    def _bloom(self) -> tuple[int, float, int]: ...
    def _commit_lock(self, tx: Transaction, instant: str, action: Action | None = None) -> None: ...
    def schedule_clustering(self, dry_run: bool = False) -> ClusteringPlan | None: ...
    def run_clustering(
        self, instant: str | None = None, spark: object = None, progress: Callable[[str], None] | None = None
    ) -> ClusteringResult | None: ...
    def _run_clustering_beside_writers(
        self, instant: str | None, spark: object, progress: Callable[[str], None] | None
    ) -> ClusteringResult | None: ...


class ClusteringServices:
    """Clustering, as `Maintenance` offers it."""

    def schedule_clustering(
        self: _Host, dry_run: bool = False) -> ClusteringPlan | None:
        """Plan a clustering of the small file slices (hoodie.clustering.* options) and store it as
        the requested instant; in a dry run the plan without an instant. None: nothing qualifies."""
        from engine.services import clustering

        c, size = self.config.clustering, self.config.max_file_size
        if dry_run:
            plan = clustering.plan_clustering(self.meta, self.meta.timeline(), c, size)
            return plan if plan.groups else None
        with self._tx("clustering schedule", self._index()) as tx:
            return clustering.schedule_clustering(self.meta, self.meta.timeline(), c, size, fence=tx.fence)

    def run_clustering(
        self: _Host, instant: str | None = None, spark: object = None, progress: Callable[[str], None] | None = None
    ) -> ClusteringResult | None:
        """Run a pending clustering (`instant`), or every pending one oldest first, or, with none
        pending, schedule one and run it, under the table lock. With `spark`, one task per group."""
        from engine.services import clustering
        from engine.table.create import require_format_writable

        require_format_writable(self.meta.config, self.meta.properties_uri)
        if self.config.optimistic:
            return self._run_clustering_beside_writers(instant, spark, progress)
        index = self._index()
        opts: dict[str, Any] = {"compression": self.config.compression, "bloom": self._bloom(),
                                "heartbeat_interval": self.config.heartbeat_interval_ms / 1000,
                                "key_order": self.config.bulk_insert_sort_mode != "NONE",
                                "local_max_bytes": self.config.local_service_bytes}
        with self._tx("clustering", index) as tx:
            c = self.config.clustering
            if instant is None:
                return clustering.cluster(self.meta, c, self.config.max_file_size, spark=spark, index=index,
                                          fence=tx.fence, progress=progress, **opts)
            plan = clustering.show(self.meta, instant)
            return clustering.execute_clustering(self.meta, plan, c, spark=spark, index=index, fence=tx.fence,
                                                 progress=progress, **opts)

    def _run_clustering_beside_writers(
        self: _Host, instant: str | None, spark: object, progress: Callable[[str], None] | None
    ) -> ClusteringResult | None:
        """Optimistic concurrency control: as `_run_compaction_beside_writers`. Under the lock, pick
        or schedule a plan (leaving out the groups of writes in flight) and start its heartbeat;
        rewrite the groups without the lock (writers go on; updates to planned groups are refused,
        or let in by SparkAllowUpdateStrategy, which then makes this clustering give up at the
        commit check); take the lock again to complete it."""
        from engine.services import clustering
        from engine.table.clustering_plan import requested_action
        from engine.transaction.heartbeat import Heartbeat

        cfg, index = self.config, self._index()
        with self._tx("clustering", index, service=False) as tx:
            with tx.locked("clustering schedule"):
                plan = clustering.plan_beside_writers(self.meta, cfg.clustering, cfg.max_file_size,
                                                      cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses, instant)
                if plan is None:
                    return None
                heartbeat = Heartbeat.start(self.meta.storage, plan.instant, cfg.heartbeat_interval_ms / 1000)
            action = requested_action(self.meta.config.version)
            try:
                return clustering.execute_clustering(
                    self.meta, plan, cfg.clustering, spark=spark, index=index, fence=tx.fence, progress=progress,
                    compression=cfg.compression, bloom=self._bloom(), heartbeat_interval=None,
                    key_order=cfg.bulk_insert_sort_mode != "NONE", local_max_bytes=cfg.local_service_bytes,
                    before_complete=lambda: self._commit_lock(tx, plan.instant, action),
                )
            finally:
                heartbeat.stop()

    def clustering_plans(self: _Host) -> list[ClusteringPlan]:
        """The pending clustering plans, oldest first."""
        from engine.services import clustering

        return clustering.pending_plans(self.meta, self.meta.timeline())

    def cluster(
        self: _Host, dry_run: bool = False, spark: object = None) -> ClusteringPlan | ClusteringResult | None:
        """Schedule and run a clustering (the plan alone in a dry run)."""
        return self.schedule_clustering(dry_run=True) if dry_run else self.run_clustering(spark=spark)


__all__ = ["ClusteringServices"]
