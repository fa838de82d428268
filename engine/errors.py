"""The engine's exceptions: one root users can catch, and a few precise subclasses."""

from __future__ import annotations


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""


class TableNotFoundError(EngineError):
    """The path holds no Hudi table (no readable `.hoodie/hoodie.properties`)."""


class TableExistsError(EngineError):
    """A table already exists where one was asked to be created."""


class InvalidInputError(EngineError):
    """The input data or arguments are unusable (null keys, missing columns, bad types...)."""


class SchemaMismatchError(InvalidInputError):
    """The incoming data's schema does not fit the table's schema."""


class InvalidConfigError(EngineError):
    """A configuration value is unknown or out of range."""


class InstantNotFoundError(EngineError):
    """An instant named by the caller is not on the timeline (or not completed)."""


class CommitConflictError(EngineError):
    """Another writer completed or claimed the same instant first."""


class StorageError(EngineError):
    """The storage layer failed (I/O error, permission, unreachable endpoint)."""


class CorruptTableError(EngineError):
    """A table file (properties, timeline, base file) could not be parsed."""
