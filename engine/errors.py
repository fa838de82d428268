"""The engine's exceptions: one root users can catch, and a few precise subclasses."""

from __future__ import annotations

from typing import Protocol


class LockHolder(Protocol):
    """What an error says about a lock's holder (`engine.transaction.lock_info.LockInfo` is one); a
    protocol, so that this module imports nothing of the engine."""

    @property
    def owner(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def purpose(self) -> str: ...
    @property
    def acquired_at_ms(self) -> int: ...
    @property
    def expires_at_ms(self) -> int: ...


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""


class TableNotFoundError(EngineError):
    """The path holds no Hudi table (no readable `.hoodie/hoodie.properties`)."""


class TableExistsError(EngineError):
    """A table already exists where one was asked to be created."""


class NestedTableError(TableExistsError):
    """A table cannot be created (or registered) there: the location lies inside another table,
    or another table lies inside it. `other` is that table's location."""

    def __init__(self, message: str, other: str = "") -> None:
        super().__init__(message)
        self.other = other

    def __reduce__(self) -> tuple[type[NestedTableError], tuple[str, str]]:
        return (type(self), (str(self), self.other))


class InvalidInputError(EngineError):
    """The input data or arguments are unusable (null keys, missing columns, bad types...)."""


class SchemaMismatchError(InvalidInputError):
    """The incoming data's schema does not fit the table's schema."""


class SchemaChangeError(InvalidInputError):
    """A column change (rename, drop, move, retype) that is refused; the table is unchanged."""


class InvalidConfigError(EngineError):
    """A configuration value is unknown or out of range."""


class InstantNotFoundError(EngineError):
    """An instant named by the caller is not on the timeline (or not completed)."""


class CommitConflictError(EngineError):
    """Another writer completed or claimed the same instant first."""


class PendingClusteringError(CommitConflictError):
    """The write would update file groups that a pending clustering (scheduled by Apache Hudi) is
    going to rewrite; executing it would drop the update. `instant` names the clustering and
    `groups` the (partition, file id) pairs hit. Nothing was written."""

    def __init__(self, message: str, instant: str = "", groups: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.instant = instant
        self.groups = groups


class IndexChangedError(CommitConflictError):
    """A lookup found index files gone that it had listed (a rollback, or a compaction older
    than the retention of superseded files, ran meanwhile) and retrying did not settle it."""


class StorageError(EngineError):
    """The storage layer failed (I/O error, permission, unreachable endpoint)."""


class CorruptTableError(EngineError):
    """A table file (properties, timeline, base file) could not be parsed."""


class UnsupportedFeatureError(EngineError):
    """The table uses something this engine does not read (a base file format, a log block kind);
    the message names it and the file."""


class UnsupportedTableVersionError(EngineError):
    """The table is a valid Hudi table of a version this engine does not read (`version`, or
    None when `hoodie.table.version` is missing or not a number); the message names the file."""

    def __init__(self, message: str, version: int | None = None) -> None:
        super().__init__(message)
        self.version = version

    def __reduce__(self) -> tuple[type[UnsupportedTableVersionError], tuple[str, int | None]]:
        return (type(self), (str(self), self.version))


class ConcurrentWriteError(CommitConflictError):
    """Another writer holds the table lock, or took it over from us (see `engine.transaction.lock`).

    The holder's details are attributes (None when unknown): `owner` (its uuid), `host`,
    `pid`, `purpose` ("upsert", "rollback"...), `acquired_at_ms` and `expires_at_ms`
    (epoch milliseconds), and `holder`, the whole `LockInfo`.
    """

    def __init__(self, message: str, holder: LockHolder | None = None) -> None:
        super().__init__(message)
        self.holder = holder
        self.owner = holder.owner if holder else None
        self.host = holder.host if holder else None
        self.pid = holder.pid if holder else None
        self.purpose = holder.purpose if holder else None
        self.acquired_at_ms = holder.acquired_at_ms if holder else None
        self.expires_at_ms = holder.expires_at_ms if holder else None

    def __reduce__(self) -> tuple[type[ConcurrentWriteError], tuple[str, LockHolder | None]]:
        # Keep the holder when the error crosses a process boundary.
        return (type(self), (str(self), self.holder))


class WriteConflictError(CommitConflictError):
    """Optimistic concurrency control: a write that ran beside others found, at its commit, that
    an instant completed (or a table service scheduled) since it started touched the same file
    groups, rolled back a commit it read, or inserted the same new keys. The write was rolled back;
    the table holds the other writer's commit. Retrying the write is safe.

    `instant`: this write's instant; `other`: the conflicting instant; `groups`: (partition,
    file id) pairs both touched (empty for a key or rollback conflict); `keys`: a sample of the
    record keys both inserted (index conflicts)."""

    def __init__(
        self,
        message: str,
        instant: str = "",
        other: str = "",
        groups: tuple[tuple[str, str], ...] = (),
        keys: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.instant = instant
        self.other = other
        self.groups = groups
        self.keys = keys

    def __reduce__(self) -> tuple[type[WriteConflictError], tuple[str, str, str, tuple, tuple]]:
        return (type(self), (str(self), self.instant, self.other, self.groups, self.keys))


class RollbackRefusedError(EngineError):
    """A rollback or restore would lose committed data: later commits build on the instant, its
    file versions were cleaned, or a savepoint protects it. The table is left unchanged.

    `dependents` names the later instants (when that is the reason).
    """

    def __init__(self, message: str, dependents: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.dependents = dependents
