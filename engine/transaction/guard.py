"""The lock and the guard of a table mutation.

`BaseTransaction` holds the table lock (ConcurrentWriteError if another writer holds it) and gives
a write its `WriteGuard`: a heartbeat for its instant while it runs, and a fencing check of the
lock right before its commit completes. Under optimistic concurrency control
(`hoodie.write.concurrency.mode`) the lock is released after the transaction's start (the
repair), taken for the claim of the instant, and taken again once the files are written, for the
commit check (`engine.transaction.occ`), the index update, the completion and the services.

The repair and the automatic services it runs under the lock are the table services' own
(`engine.services.transaction.Transaction`): this layer is below them, and below the writes
that call the guard.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, TypeVar

import pyarrow as pa

from engine import failpoints
from engine.config.write_config import WriteConfig
from engine.errors import ConcurrentWriteError, TableNotFoundError
from engine.index.base import Index
from engine.table.meta_client import PROPERTIES_PATH, MetaClient
from engine.timeline.instant import Action
from engine.timeline.timeline import Timeline
from engine.transaction import occ
from engine.transaction.heartbeat import Heartbeat
from engine.transaction.lock import TableLock


class Claimed(Protocol):
    """What a claim returns (a write's pending commit): the instant it claimed."""

    @property
    def instant(self) -> str: ...


C = TypeVar("C", bound=Claimed)


@dataclass
class WriteGuard:
    """Hooks a write calls: `claim` to claim its instant (and start its heartbeat), `before_commit`
    once its files are written (under OCC: take the lock and check for conflicts), `before_complete`
    right before the completed instant is written, `finished` at the end (success or not)."""

    tx: BaseTransaction
    _heartbeat: Heartbeat | None = field(default=None, init=False)
    _seen: occ.Seen = field(default=occ.Seen(frozenset(), frozenset()), init=False)

    @property
    def meta(self) -> MetaClient:
        return self.tx.meta

    @property
    def lock(self) -> TableLock | None:
        return self.tx.lock

    def claim(self, timeline: Timeline, start: Callable[[Timeline], C], abort: Callable[[C], None]) -> C:
        """Claim the write's instant with `start` (given the timeline to claim after) and start its
        heartbeat; if the heartbeat cannot start, `abort` undoes the claim. `timeline` is the one
        the write read the table from: under OCC, the instants completed in it are those the commit
        check takes as seen. Under OCC the claim takes the lock for that moment, and passes `start`
        a fresh timeline."""
        if not self.tx.optimistic:
            return self._started(start(timeline), abort)
        self._seen = occ.seen(timeline)
        with self.tx.locked("claim"):
            # the heartbeat starts before the lock goes: another writer's repair sees it live
            return self._started(start(self.meta.timeline()), abort)

    def _started(self, claimed: C, abort: Callable[[C], None]) -> C:
        """Start the heartbeat of a claimed instant; if that fails, the claim is undone."""
        try:
            self.started(claimed.instant)
        except BaseException:
            abort(claimed)
            raise
        return claimed

    def started(self, instant: str) -> None:
        self._heartbeat = Heartbeat.start(
            self.meta.storage, instant, self.tx.config.heartbeat_interval_ms / 1000
        )

    def before_commit(
        self, instant: str, action: Action, operation: str, groups: Iterable[tuple[str, str]]
    ) -> occ.CheckResult | None:
        """Once the write's files are written, before the index is updated: under OCC take the table
        lock (held until the transaction ends) and check the write against what completed since it
        started (`engine.transaction.occ`; WriteConflictError); for a single writer, the fencing check."""
        if not self.tx.optimistic:
            self.before_complete()
            return None
        failpoints.hit("write.before_commit_lock")
        self.tx.take_lock("commit")
        failpoints.hit("write.commit_locked")
        cfg = self.tx.config
        occ.check_still_ours(
            self.meta, instant, action, cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses
        )
        return occ.check(self.meta, instant, action, operation, groups, self._seen)

    def final_schema(self, instant: str, write_schema: pa.Schema) -> pa.Schema:
        """Under the commit lock (after `before_commit`): the schema the write records. Under OCC,
        Apache Hudi's schema conflict resolution (`occ.resolve_schema`): another writer's evolved
        schema is carried forward by a write that did not evolve it, and incompatible evolutions
        raise WriteConflictError. A single writer's schema is its own."""
        if not self.tx.optimistic:
            return write_schema
        avro = occ.resolve_schema(self.meta, instant, self._seen, write_schema)
        if avro is None:
            return write_schema
        return table_write_schema(self.meta, avro, instant, write_schema)

    def before_complete(self) -> None:
        if self.lock is not None:
            self.lock.check()

    def holds_lock(self) -> bool:
        """False once the lock was lost (taken over after our lease expired): from then on the
        table belongs to the new holder, whose repair cleans up after us. True while no lock is
        held at all (a write under OCC before its commit: its own files are its to remove)."""
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


def table_write_schema(meta: MetaClient, avro: str, instant: str, write_schema: pa.Schema) -> pa.Schema:
    """The table's schema `avro` as a write schema of `instant`: with the column ids of the table's
    internal schema when the write found one (schema on read), as `WriteJob._schema` makes it."""
    from engine.schema import internal as internal_schema
    from engine.schema.avro import avro_to_arrow

    schema = avro_to_arrow(avro)
    if internal_schema.FILE_COLUMNS_KEY in (write_schema.metadata or {}):
        schema = internal_schema.for_write(schema, meta.schema_versions(meta.timeline()), int(instant))
    return schema


class BaseTransaction(ABC):
    """The table lock a mutation holds, in either concurrency mode, and the guard its write calls.
    `engine.services.transaction.Transaction` adds what runs under it: the repair at the start and
    the automatic services after a commit.

    `with Transaction(meta, config, index, "upsert") as tx:` ... `tx.guard` ... `tx.after_commit()`.

    A single writer (the default) holds the table lock from `__enter__` to `__exit__`. Under
    optimistic concurrency control the lock is held for the repair at the start, for the claim of
    the instant, and from the commit check to the end (index update, completion, automatic
    services); the write's files are written without it, beside other writers."""

    def __init__(
        self, meta: MetaClient, config: WriteConfig, index: Index | None, purpose: str, service: bool = False
    ) -> None:
        self.meta = meta
        self.config = config
        self.index = index
        self.purpose = purpose
        # a table service (rollback, clean, archival...) holds the lock for its whole run in either
        # mode; under OCC its repair is lazy too (another writer's live instant is left alone)
        self.service = service
        self.lock: TableLock | None = None

    @property
    def optimistic(self) -> bool:
        """Whether the lock is released between the steps (a write, or a compaction run, under OCC)."""
        return self.config.optimistic and not self.service

    def take_lock(self, step: str = "") -> None:
        """Acquire the table lock (waiting up to the configured wait) unless held."""
        if self.lock is not None:
            return
        lock = TableLock(
            self.meta.storage,
            f"{self.purpose} ({step})" if step and self.optimistic else self.purpose,
            lease=self.config.lock_lease_ms / 1000,
            wait=self.config.lock_wait_seconds,
        )
        lock.acquire()
        if not self.meta.storage.exists(PROPERTIES_PATH):
            # removed while we waited (a failed first write's clean-up, `engine.spark.datasource`):
            # this is no table any more, and nothing may be written as if it were
            lock.release()
            raise TableNotFoundError(
                f"no Hudi table at {self.meta.storage.base_uri} any more "
                "(it was removed while this write waited for its lock)"
            )
        self.lock = lock

    def release_lock(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @contextmanager
    def locked(self, step: str) -> Iterator[None]:
        """The table lock for one step (OCC's start and claim)."""
        self.take_lock(step)
        try:
            yield
        finally:
            self.release_lock()

    def __enter__(self) -> BaseTransaction:
        self.take_lock("start")
        try:
            self.start()
        except BaseException:
            self.release_lock()
            raise
        if self.optimistic:
            self.release_lock()  # the write runs beside others; the lock is taken again to claim and commit
        return self

    @abstractmethod
    def start(self) -> None:
        """What runs under the lock when the transaction begins (the repair of the table)."""

    @abstractmethod
    def after_commit(self) -> dict[str, object]:
        """What runs under the lock after a completed commit (the automatic services)."""

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release_lock()

    def fence(self) -> None:
        """Raise ConcurrentWriteError if the lock was lost (services call it before each step)."""
        if self.lock is not None:
            self.lock.check()

    @property
    def guard(self) -> WriteGuard:
        return WriteGuard(self)


__all__ = ["BaseTransaction", "Claimed", "WriteGuard", "table_write_schema"]
