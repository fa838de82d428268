"""The single-writer transaction around every table mutation.

`Transaction` takes the table lock (ConcurrentWriteError if another writer holds it), runs
`repair` (finishing interrupted services, rolling back failed writes), and gives the write a
`WriteGuard`: a heartbeat for its instant while it runs, and a fencing check of the lock right
before its commit completes. After a successful commit, the automatic services (clean, then
archival) run while the lock is still held.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import TracebackType

from engine.config.table_config import TableType
from engine.config.write_config import WriteConfig
from engine.index.base import Index
from engine.services import archive as archive_service
from engine.services import clean as clean_service
from engine.services.repair import RepairReport, repair
from engine.table.heartbeat import Heartbeat
from engine.table.lock import TableLock
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action

_log = logging.getLogger(__name__)


@dataclass
class WriteGuard:
    """Hooks a write calls: `started` once its instant is claimed, `before_complete` right before
    the completed instant is written, `finished` at the end (success or not)."""

    meta: MetaClient
    lock: TableLock | None
    heartbeat_interval_ms: int
    _heartbeat: Heartbeat | None = field(default=None, init=False)

    def started(self, instant: str) -> None:
        self._heartbeat = Heartbeat.start(self.meta.storage, instant, self.heartbeat_interval_ms / 1000)

    def before_complete(self) -> None:
        if self.lock is not None:
            self.lock.check()

    def holds_lock(self) -> bool:
        """False once the lock was lost (taken over after our lease expired): from then on the
        table belongs to the new holder, whose repair cleans up after us."""
        from engine.errors import ConcurrentWriteError

        if self.lock is None:
            return True
        try:
            self.lock.check()
        except ConcurrentWriteError:
            return False
        return True

    def finished(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None


class Transaction:
    """`with Transaction(meta, config, index, "upsert") as tx:` ... `tx.guard` ... `tx.after_commit()`."""

    def __init__(self, meta: MetaClient, config: WriteConfig, index: Index | None, purpose: str) -> None:
        self.meta = meta
        self.config = config
        self.index = index
        self.purpose = purpose
        self.lock: TableLock | None = None
        self.repair_report: RepairReport | None = None
        self.services: dict[str, object] = {}
        self.spark: object = None  # a writer's SparkSession: inline compaction runs its slices as tasks

    def __enter__(self) -> Transaction:
        lock = TableLock(
            self.meta.storage,
            self.purpose,
            lease=self.config.lock_lease_ms / 1000,
            wait=self.config.lock_wait_ms / 1000,
        )
        lock.acquire()
        self.lock = lock
        try:
            self.repair_report = repair(
                self.meta,
                self.index,
                self.config.heartbeat_interval_ms,
                self.config.heartbeat_tolerable_misses,
                fence=lock.check,
                metadata_enable=self.config.metadata_enable,
            )
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def fence(self) -> None:
        """Raise ConcurrentWriteError if the lock was lost (services call it before each step)."""
        if self.lock is not None:
            self.lock.check()

    @property
    def guard(self) -> WriteGuard:
        return WriteGuard(self.meta, self.lock, self.config.heartbeat_interval_ms)

    def after_commit(self) -> dict[str, object]:
        """The automatic table services after a completed commit (still under the lock).

        They never raise: the commit is complete, and a caller retrying a "failed" insert would
        duplicate it. A failure is reported in the result (`<service>_error`) and logged; the
        service's pending instant is finished by the next repair.
        """
        cfg = self.config
        if cfg.compact_inline and self.meta.config.table_type is TableType.MERGE_ON_READ:
            self._compact_inline()
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
                    self.meta, cfg.keep_min_commits, cfg.keep_max_commits, fence=self.fence,
                    compaction_batch_size=cfg.timeline_compaction_batch_size,
                )
                if archived:
                    self.services["archived"] = archived
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
        if not pending and compaction_service.deltacommits_since_compaction(timeline) < cfg.compact_max_delta_commits:
            return
        try:
            res = compaction_service.compact(
                self.meta,
                spark=self.spark,
                fence=self.fence,
                compression=cfg.compression,
                bloom=(cfg.bloom_num_entries, cfg.bloom_fpp, cfg.bloom_max_entries),
                heartbeat_interval=cfg.heartbeat_interval_ms / 1000,
            )
            if res is not None:
                self.services["compaction"] = res
        except Exception as exc:
            _log.warning("inline compaction of %s failed: %s", self.meta.storage.base_uri, exc)
            self.services["compaction_error"] = f"{type(exc).__name__}: {exc}"


def _retained(cfg: WriteConfig) -> int:
    if cfg.cleaner_policy == clean_service.KEEP_LATEST_COMMITS:
        return cfg.cleaner_commits_retained
    return cfg.cleaner_file_versions_retained
