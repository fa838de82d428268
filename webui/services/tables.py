"""The table registry: register an existing table, create a new one, open a registered one.

Spark-free: creating a table writes only `.hoodie/hoodie.properties` (`MetaClient.create`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app
from werkzeug.exceptions import NotFound

from engine.facade import (
    AVAILABLE_INDEXES,
    CREATE_VERSIONS,
    DEFAULT_INDEX,
    TABLE_VERSION,
    EngineError,
    MetaClient,
    TableExistsError,
    TableNotFoundError,
    is_within,
    new_table_config,
)
from webui.extensions import db
from webui.models import TableEntry, User
from webui.paths import PathNotAllowedError, check_table_name, default_table_path, resolve_table_path

INDEX_CHOICES = sorted(i.value for i in AVAILABLE_INDEXES)
DEFAULT_INDEX_NAME = DEFAULT_INDEX.value
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


class RegistryError(ValueError):
    """A table cannot be registered or created (the message says why); nothing was changed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class NewTable:
    name: str
    record_key: str
    partition_fields: str = ""
    precombine_field: str | None = None
    table_type: str = "COPY_ON_WRITE"
    index: str = DEFAULT_INDEX_NAME
    path: str | None = None
    hive_style: bool = False
    table_version: int = TABLE_VERSION
    cdc_mode: str | None = None  # Apache Hudi's CDC logging mode (None: no CDC log)


def roots() -> list[str]:
    return list(current_app.config["CONSOLE_WAREHOUSE_ROOTS"])


def list_tables() -> list[TableEntry]:
    return list(db.session.scalars(sa.select(TableEntry).order_by(TableEntry.name)))


def get_table(name: str) -> TableEntry:
    entry = db.session.scalar(sa.select(TableEntry).where(TableEntry.name == name))
    if entry is None:
        raise NotFound(f"no registered table named {name!r}")
    return entry


def open_meta(entry: TableEntry) -> MetaClient:
    return MetaClient.open(entry.base_path)


def _checked_path(path: str) -> str:
    try:
        return resolve_table_path(path, roots())
    except PathNotAllowedError as exc:
        raise RegistryError(str(exc), 403) from exc


def _check_unique(name: str, path: str) -> None:
    """No second registration of a name or a location, and no table inside or above a registered
    one (its services would treat the other's files as its own); locations are canonical."""
    if db.session.scalar(sa.select(TableEntry.id).where(TableEntry.name == name)) is not None:
        raise RegistryError(f"a table named {name!r} is already registered", 409)
    for other in list_tables():
        if other.base_path == path:
            raise RegistryError(f"the table at {path} is already registered (as {other.name!r})", 409)
        if is_within(path, other.base_path):
            raise RegistryError(f"{path} lies inside the registered table {other.name!r} at {other.base_path}", 409)
        if is_within(other.base_path, path):
            raise RegistryError(f"the registered table {other.name!r} at {other.base_path} lies inside {path}", 409)


def _check_not_nested_on_storage(path: str) -> None:
    """Refuse a location inside a table that exists on storage (registered or not)."""
    from engine.facade import enclosing_table, storage_for

    outer = enclosing_table(storage_for(path))
    if outer is not None:
        raise RegistryError(f"{path} lies inside the table at {outer}; move it out of that table's folder", 409)


def _entry_from_meta(name: str, meta: MetaClient, actor: User | None) -> TableEntry:
    cfg = meta.config
    return TableEntry(
        name=name,
        base_path=meta.storage.base_uri,
        table_type=cfg.table_type.value,
        record_key=",".join(cfg.record_key_fields),
        partition_fields=",".join(cfg.partition_fields),
        precombine_field=cfg.precombine_field,
        index_type=cfg.index_type.value if cfg.index_type else None,
        created_by=actor.id if actor else None,
    )


def register_existing(path: str, name: str | None, actor: User | None) -> TableEntry:
    """Register the Hudi table at `path` (which must lie under a warehouse root)."""
    real = _checked_path(path)
    try:
        meta = MetaClient.open(real)
    except TableNotFoundError as exc:
        raise RegistryError(str(exc), 404) from exc
    except EngineError as exc:
        raise RegistryError(f"cannot open the table at {real}: {exc}") from exc
    table_name = name or meta.config.name
    try:
        check_table_name(table_name)
    except ValueError as exc:
        raise RegistryError(str(exc)) from exc
    _check_unique(table_name, meta.storage.base_uri)
    _check_not_nested_on_storage(meta.storage.base_uri)
    entry = _entry_from_meta(table_name, meta, actor)
    db.session.add(entry)
    db.session.commit()
    return entry


def create_table(spec: NewTable, actor: User | None) -> TableEntry:
    """Create an empty table (under the first warehouse root unless a path is given) and register it."""
    try:
        check_table_name(spec.name)
    except ValueError as exc:
        raise RegistryError(str(exc)) from exc
    path = _checked_path(spec.path) if spec.path else default_table_path(spec.name, roots())
    if not spec.path:
        path = _checked_path(path)
    _check_unique(spec.name, path)
    if not (spec.record_key or "").strip():
        raise RegistryError("a record key field is required")
    if spec.table_version not in CREATE_VERSIONS:
        raise RegistryError(f"table_version must be one of {', '.join(map(str, CREATE_VERSIONS))}, got {spec.table_version!r}")
    if spec.table_type not in TABLE_TYPES:
        raise RegistryError(f"table_type must be {' or '.join(TABLE_TYPES)}, got {spec.table_type!r}")
    try:
        config = new_table_config(
            name=spec.name,
            record_key=spec.record_key,
            partition_fields=spec.partition_fields or None,
            precombine_field=spec.precombine_field or None,
            table_type=spec.table_type,
            index=spec.index or DEFAULT_INDEX_NAME,
            hive_style=spec.hive_style,
            table_version=spec.table_version,
            cdc=bool(spec.cdc_mode),
            cdc_mode=spec.cdc_mode or None,
        )
        from engine.facade import create_table, storage_for

        meta = create_table(storage_for(path), config)  # versions 8 and 9 with a metadata table
    except TableExistsError as exc:  # NestedTableError too: another table inside or around it
        raise RegistryError(str(exc), 409) from exc
    except EngineError as exc:
        raise RegistryError(str(exc), 400) from exc
    entry = _entry_from_meta(spec.name, meta, actor)
    db.session.add(entry)
    db.session.commit()
    return entry


def describe(entry: TableEntry) -> dict:
    """The registry row as API data."""
    return {
        "name": entry.name,
        "path": entry.base_path,
        "table_type": entry.table_type,
        "record_key": entry.record_key,
        "partition_fields": [f for f in entry.partition_fields.split(",") if f],
        "precombine_field": entry.precombine_field,
        "index": entry.index_type,
        "registered_at": entry.created_at.isoformat() + "Z",
    }
