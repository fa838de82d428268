"""The transaction around every table mutation: the lock and the write's guard
(`engine.transaction.guard.BaseTransaction`), with what the table services run under it.

When the transaction begins, `repair` runs under the lock (finishing interrupted services,
rolling back failed writes; under optimistic concurrency only writes whose writer is gone: Hudi's
LAZY failed-writes policy). After a successful commit, the automatic services (inline compaction,
clean, then archival) run while the lock is still held.
"""

from __future__ import annotations

import logging
from types import TracebackType

from engine.config.table_config import TableType
from engine.config.write_config import WriteConfig
from engine.index.base import Index
from engine.metadata import compaction as metadata_compaction
from engine.services import archive as archive_service
from engine.services import clean as clean_service
from engine.services import metadata_archive
from engine.services.repair import RepairReport, repair
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from engine.transaction.guard import BaseTransaction, WriteGuard, table_write_schema

_log = logging.getLogger(__name__)


class Transaction(BaseTransaction):
    """`with Transaction(meta, config, index, "upsert") as tx:` ... `tx.guard` ... `tx.after_commit()`:
    the `BaseTransaction` (which says when the lock is held) with this layer's repair on entering
    and automatic services after the commit."""

    def __init__(
        self, meta: MetaClient, config: WriteConfig, index: Index | None, purpose: str, service: bool = False
    ) -> None:
        super().__init__(meta, config, index, purpose, service)
        self.repair_report: RepairReport | None = None
        self.services: dict[str, object] = {}
        self.spark: object = None  # a writer's SparkSession: inline compaction runs its slices as tasks

    def __enter__(self) -> Transaction:
        # the metadata table's compaction, run from the instant-completion hook, follows this writer
        self._compaction_setting = metadata_compaction.configure(self.config.metadata_compact_max_delta_commits)
        try:
            super().__enter__()
        except BaseException:
            metadata_compaction.reset(self._compaction_setting)
            raise
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            metadata_compaction.reset(self._compaction_setting)

    def start(self) -> None:
        """Repair the table: finish interrupted services, roll back failed writes, upgrade."""
        self.repair_report = repair(
            self.meta,
            self.index,
            self.config.heartbeat_interval_ms,
            self.config.heartbeat_tolerable_misses,
            fence=self.fence,
            metadata_enable=self.config.metadata_enable,
            column_stats_enable=self.config.metadata_column_stats_enable,
            lazy=self.config.optimistic,
            auto_upgrade=self.config.auto_upgrade,
            skip_default_partition_validation=self.config.skip_default_partition_validation,
        )

    def after_commit(self) -> dict[str, object]:
        """The automatic table services after a completed commit (still under the lock).

        They never raise: the commit is complete, and a caller retrying a "failed" insert would
        duplicate it. A failure is reported in the result (`<service>_error`) and logged; the
        service's pending instant is finished by the next repair.
        """
        cfg = self.config
        if cfg.compact_inline and self.meta.config.table_type is TableType.MERGE_ON_READ:
            self._compact_inline()
        if cfg.clustering.inline or cfg.clustering.schedule_inline:
            self._cluster_inline()
        if cfg.clean_automatic:
            try:
                res = clean_service.clean(self.meta, cfg.cleaner_policy, _retained(cfg), fence=self.fence)
                if res is not None:
                    self.services["clean"] = res
            except Exception as exc:
                _log.warning("automatic clean of %s failed: %s", self.meta.storage.base_uri, exc)
                self.services["clean_error"] = f"{type(exc).__name__}: {exc}"
        if cfg.archive_automatic:
            try:
                archived = archive_service.archive(
                    self.meta,
                    cfg.keep_min_commits,
                    cfg.keep_max_commits,
                    fence=self.fence,
                    compaction_batch_size=cfg.timeline_compaction_batch_size,
                )
                if archived:
                    self.services["archived"] = archived
                archived_mdt = metadata_archive.archive_metadata_table(
                    self.meta, cfg.keep_min_commits, cfg.keep_max_commits, cfg.timeline_compaction_batch_size)
                if archived_mdt:
                    self.services["metadata_archived"] = archived_mdt
            except Exception as exc:
                _log.warning("automatic archival of %s failed: %s", self.meta.storage.base_uri, exc)
                self.services["archive_error"] = f"{type(exc).__name__}: {exc}"
        return self.services

    def _compact_inline(self) -> None:
        """Apache Hudi's inline compaction: after `hoodie.compact.inline.max.delta.commits`
        deltacommits since the last compaction (or with one pending), compact now."""
        from engine.services import compaction as compaction_service

        cfg = self.config
        timeline = self.meta.timeline()
        pending = any(i.action is Action.COMPACTION for i in timeline.pending.instants)
        if (
            not pending
            and compaction_service.deltacommits_since_compaction(timeline) < cfg.compact_max_delta_commits
        ):
            return
        compression, beat = cfg.compression, cfg.heartbeat_interval_ms / 1000
        bloom = (cfg.bloom_num_entries, cfg.bloom_fpp, cfg.bloom_max_entries)
        try:
            if cfg.optimistic:  # other writers' files in flight: a plan of the free slices only
                plan = compaction_service.plan_beside_writers(
                    self.meta, cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses
                )
                res = (
                    None
                    if plan is None
                    else compaction_service.execute_compaction(
                        self.meta,
                        plan,
                        spark=self.spark,
                        fence=self.fence,
                        compression=compression,
                        bloom=bloom,
                        heartbeat_interval=beat,
                        local_max_bytes=cfg.local_service_bytes,
                    )
                )
            else:
                res = compaction_service.compact(
                    self.meta,
                    spark=self.spark,
                    fence=self.fence,
                    compression=compression,
                    bloom=bloom,
                    heartbeat_interval=beat,
                    local_max_bytes=cfg.local_service_bytes,
                )
            if res is not None:
                self.services["compaction"] = res
        except Exception as exc:
            _log.warning("inline compaction of %s failed: %s", self.meta.storage.base_uri, exc)
            self.services["compaction_error"] = f"{type(exc).__name__}: {exc}"


    def _cluster_inline(self) -> None:
        """Apache Hudi's inline clustering: after `hoodie.clustering.inline.max.commits` writes since
        the last clustering, schedule one (`hoodie.clustering.schedule.inline`) and run it
        (`hoodie.clustering.inline`). Under optimistic concurrency the plan leaves out the file
        groups of writes in flight."""
        from engine.services import clustering

        cfg = self.config
        c = cfg.clustering
        timeline = self.meta.timeline()
        if clustering.commits_since_clustering(self.meta, timeline) < c.inline_max_commits:
            return
        try:
            exclude: frozenset[tuple[str, str]] = frozenset()
            if cfg.optimistic:
                from engine.transaction.occ import pending_write_groups

                exclude = pending_write_groups(self.meta, timeline)
            plan = clustering.schedule_clustering(self.meta, timeline, c, cfg.max_file_size, fence=self.fence,
                                                  exclude=exclude)
            if plan is None:
                return
            if not c.inline:
                self.services["clustering_scheduled"] = plan.instant
                return
            bloom = (cfg.bloom_num_entries, cfg.bloom_fpp, cfg.bloom_max_entries)
            self.services["clustering"] = clustering.execute_clustering(
                self.meta, plan, c, spark=self.spark, index=self.index, fence=self.fence, compression=cfg.compression,
                bloom=bloom, heartbeat_interval=cfg.heartbeat_interval_ms / 1000,
                key_order=cfg.bulk_insert_sort_mode != "NONE", local_max_bytes=cfg.local_service_bytes)
        except Exception as exc:
            _log.warning("inline clustering of %s failed: %s", self.meta.storage.base_uri, exc)
            self.services["clustering_error"] = f"{type(exc).__name__}: {exc}"


def _retained(cfg: WriteConfig) -> int:
    if cfg.cleaner_policy == clean_service.KEEP_LATEST_COMMITS:
        return cfg.cleaner_commits_retained
    return cfg.cleaner_file_versions_retained


__all__ = ["Transaction", "WriteGuard", "table_write_schema"]
