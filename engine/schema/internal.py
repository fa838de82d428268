"""Apache Hudi's internal schema (schema on read): column ids that survive renames and drops.

With schema on read (``hoodie.schema.on.read.enable``) Apache Hudi gives every column an id and
keeps the table's schema versions as JSON (``SerDeHelper``):

* each commit's ``extraMetadata.latestSchema``: the table's schema after that commit, as
  ``{"max_column_id":N,"version-id":T,"type":"record","fields":[{"id":0,"name":...,
  "optional":true,"type":"string"},...]}``; the version id is the instant (as a number) of the
  commit that last changed the schema, ``max_column_id`` the largest id ever given;
* ``.hoodie/.schema/<instant>.schemacommit``: every version so far, newest first, as
  ``{"schemas":[...]}``; a reader takes the file of the newest completed commit.

Ids are given as Apache Hudi's ``AvroInternalSchemaConverter`` gives them: a record's fields take
consecutive ids first (the five meta columns are 0-4), then their nested types, depth first; a list
element takes one id, a map's key and value two. A file written under version V is read under a
later version R by id: a column of R whose id V had under another name is that column renamed, one
whose id V lacks reads as nulls (added later, or dropped and added again).

Pure: no Spark, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine.errors import SchemaMismatchError
from engine.schema.avro import META_FIELDS, type_name, with_meta_fields

__all__ = [
    "FILE_COLUMNS_KEY",
    "InternalSchema",
    "attach_versions",
    "evolve",
    "file_columns",
    "from_arrow",
    "history_json",
    "parse_history",
    "search",
    "type_string",
]

LATEST_SCHEMA_KEY = "latestSchema"
"""The commit metadata key (``extraMetadata``) of the table's internal schema after the commit."""

SCHEMA_FOLDER = ".hoodie/.schema"
SCHEMA_COMMIT = "schemacommit"

FILE_COLUMNS_KEY = b"hoodie.internal.columns"
"""Arrow schema metadata: the top-level column ids of a read schema and of every version (JSON),
for :func:`file_columns`; never written into a file."""


@dataclass(frozen=True)
class InternalSchema:
    version_id: int
    max_column_id: int
    fields: tuple[dict[str, Any], ...]  # Hudi's JSON form of the top-level fields

    # ---- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"max_column_id": self.max_column_id, "version-id": self.version_id, "type": "record",
                "fields": list(self.fields)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InternalSchema:
        if d.get("type") != "record" or not isinstance(d.get("fields"), list):
            raise ValueError("an internal schema is a record with fields")
        fields = tuple(d["fields"])
        return cls(int(d.get("version-id", 0)), int(d.get("max_column_id", _max_id(fields))), fields)

    @classmethod
    def from_json(cls, text: str) -> InternalSchema:
        return cls.from_dict(json.loads(text))

    # ---- lookups -------------------------------------------------------------------------
    def ids(self) -> dict[str, int]:
        """Top-level column name -> id."""
        return {f["name"]: int(f["id"]) for f in self.fields}

    def names(self) -> dict[int, str]:
        """Top-level column id -> name."""
        return {int(f["id"]): f["name"] for f in self.fields}

    def field(self, name: str) -> dict[str, Any] | None:
        return next((f for f in self.fields if f["name"] == name), None)

    def data_names(self) -> list[str]:
        return [f["name"] for f in self.fields if f["name"] not in META_FIELDS]


# --------------------------------------------------------------------------- from Arrow


class _Ids:
    def __init__(self, start: int) -> None:
        self.next = start

    def take(self, n: int = 1) -> int:
        first = self.next
        self.next += n
        return first


def type_string(t: pa.DataType) -> str:
    """The JSON form of a primitive Arrow type as Apache Hudi's ``Type.toString`` writes it."""
    try:
        return type_name(t)
    except ValueError:
        raise SchemaMismatchError(f"type {t} has no internal schema form") from None


def _record(fields: Sequence[pa.Field], ids: _Ids, old: Mapping[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A new record (`old` None) in `AvroInternalSchemaConverter`'s order: the fields take their
    ids first, then their nested types in turn. Evolving one (`old`: the fields before, by name):
    a field found there keeps its id and its nested ids where names match; a new field takes the
    next id and then its nested ids at once, and is optional (Hudi's `ColumnAddChange`)."""
    if old is None:
        first = ids.take(len(fields))
        own: list[int | None] = [first + k for k in range(len(fields))]
    else:
        own = [int(old[f.name]["id"]) if f.name in old else None for f in fields]
    out = []
    for f, fid in zip(fields, own, strict=True):
        before = old.get(f.name) if old else None
        added = old is not None and before is None
        if fid is None:
            fid = ids.take()
        d: dict[str, Any] = {"id": fid, "name": f.name, "optional": bool(f.nullable) or added,
                             "type": _type(f.type, ids, before["type"] if before else None, added)}
        if f.name in META_FIELDS:
            d["doc"] = ""
        elif before and "doc" in before:
            d["doc"] = before["doc"]
        out.append(d)
    return out


def _type(t: pa.DataType, ids: _Ids, old: Any, added: bool = False) -> Any:
    if pa.types.is_struct(t):
        if isinstance(old, dict) and old.get("type") == "record":
            before: dict[str, Any] | None = {f["name"]: f for f in old["fields"]}
        else:
            before = {} if added else None  # inside an added column: ids in the order they come
        return {"type": "record", "fields": _record(list(t), ids, before)}
    if pa.types.is_map(t):
        same = isinstance(old, dict) and old.get("type") == "map"
        key_id, value_id = (int(old["key-id"]), int(old["value-id"])) if same else (ids.take(), ids.take())
        return {"type": "map", "key-id": key_id, "key": "string", "value-id": value_id,
                "value": _type(t.item_type, ids, old.get("value") if same else None, added),
                "value_optional": bool(t.item_field.nullable)}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        same = isinstance(old, dict) and old.get("type") == "array"
        element_id = int(old["element-id"]) if same else ids.take()
        return {"type": "array", "element-id": element_id,
                "element": _type(t.value_type, ids, old.get("element") if same else None, added),
                "element_optional": bool(t.value_field.nullable)}
    return type_string(t)


def _max_id(fields: Iterable[Any]) -> int:
    best = -1

    def walk(node: Any) -> None:
        nonlocal best
        if isinstance(node, dict):
            for key in ("id", "element-id", "key-id", "value-id"):
                if key in node:
                    best = max(best, int(node[key]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(list(fields))
    return best


def from_arrow(schema: pa.Schema, version_id: int) -> InternalSchema:
    """The internal schema Apache Hudi derives from a table schema (meta columns first, ids 0-4)."""
    full = with_meta_fields(schema)
    ids = _Ids(0)
    fields = tuple(_record(list(full), ids, None))
    return InternalSchema(version_id, ids.next - 1, fields)


def evolve(
    current: InternalSchema, schema: pa.Schema, version_id: int, renamed: Mapping[str, str] | None = None,
    history: Sequence[InternalSchema] = (),
) -> InternalSchema:
    """The version after `current` whose columns are `schema`'s: a column keeps its id when its name
    (or, for `renamed` new -> old names, its old name) is in `current`; others get new ids above
    `max_column_id`. Returns `current` itself when nothing changed (Apache Hudi then keeps the
    version id). A new top-level name that an earlier version (`history`) gave to another column
    of another type is refused: readers that match columns by name would read those old values."""
    renamed = dict(renamed or {})
    old_by_name = {f["name"]: f for f in current.fields}
    matched = {}
    for f in with_meta_fields(schema):
        source = renamed.get(f.name, f.name)
        if source in old_by_name:
            matched[f.name] = {**old_by_name[source], "name": f.name}
    ids = _Ids(current.max_column_id + 1)
    fields = tuple(_record(list(with_meta_fields(schema)), ids, matched))
    if fields == current.fields:
        return current
    new = InternalSchema(version_id, max(current.max_column_id, ids.next - 1), fields)
    _check_reuse(new, [*history, current])
    return new


def _check_reuse(new: InternalSchema, versions: Sequence[InternalSchema]) -> None:
    for f in new.fields:
        for v in versions:
            old = v.field(f["name"])
            if old is not None and int(old["id"]) != int(f["id"]) and _shape(old["type"]) != _shape(f["type"]):
                raise SchemaMismatchError(
                    f"column name '{f['name']}' was another column ({_show(old['type'])}) until version "
                    f"{v.version_id}; giving it to a {_show(f['type'])} column would make readers that "
                    "match columns by name (hudi-rs, Apache Hudi without schema on read) read the old "
                    "values as the new type: choose another name"
                )


_NOT_SHAPE = frozenset({"id", "element-id", "key-id", "value-id", "optional", "element_optional", "value_optional", "doc"})


def _shape(t: Any) -> Any:
    """A type without its ids, nullability and docs (two columns of one type differ in those)."""
    if isinstance(t, dict):
        return {k: ([_shape(f) for f in v] if k == "fields" else _shape(v)) for k, v in t.items() if k not in _NOT_SHAPE}
    return t


def _show(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type"))


# --------------------------------------------------------------------------- history


def history_json(versions: Sequence[InternalSchema]) -> str:
    """The ``.schemacommit`` file's content: every version, newest first (``SerDeHelper.inheritSchemas``)."""
    ordered = sorted(versions, key=lambda v: v.version_id, reverse=True)
    return json.dumps({"schemas": [v.to_dict() for v in ordered]}, separators=(",", ":"))


def parse_history(text: str) -> list[InternalSchema]:
    """The versions of a ``.schemacommit`` file, oldest first; ValueError when it is not one."""
    d = json.loads(text)
    if not isinstance(d, dict) or not isinstance(d.get("schemas"), list):
        raise ValueError("a schema history is {\"schemas\": [...]}")
    by_id = {v.version_id: v for v in (InternalSchema.from_dict(s) for s in d["schemas"])}
    return [by_id[k] for k in sorted(by_id)]


def search(versions: Sequence[InternalSchema], instant: str) -> InternalSchema | None:
    """The version in force at `instant`: the newest whose version id is not after it."""
    at = int(instant)
    best = None
    for v in versions:
        if v.version_id <= at and (best is None or v.version_id > best.version_id):
            best = v
    return best


# --------------------------------------------------------------------------- reading by id


def attach_versions(schema: pa.Schema, read: InternalSchema, versions: Sequence[InternalSchema]) -> pa.Schema:
    """`schema` (read under version `read`) carrying the top-level ids of every version, so that
    :func:`file_columns` can map a file's columns wherever the schema travels (Spark tasks too)."""
    payload = {
        "read": read.ids(),
        "versions": [[v.version_id, {str(k): n for k, n in v.names().items()}] for v in versions],
    }
    return schema.with_metadata({**(schema.metadata or {}), FILE_COLUMNS_KEY: json.dumps(payload).encode()})


def file_columns(schema: pa.Schema, instant: str | None) -> dict[str, str | None] | None:
    """For a file written at `instant`: each column of `schema` -> the column that holds it in the
    file (another name when renamed since), or None when the file cannot hold it (added after the
    file was written, or dropped and added again). None when no mapping applies (the table has no
    internal schema, or the instant is unknown): read columns by name."""
    raw = (schema.metadata or {}).get(FILE_COLUMNS_KEY)
    if raw is None or instant is None:
        return None
    payload = json.loads(raw)
    at = int(instant)
    chosen = None
    for vid, names in payload["versions"]:
        if vid <= at and (chosen is None or vid > chosen[0]):
            chosen = (vid, names)
    if chosen is None:  # written before the first version: no rename predates it, so its names
        if not payload["versions"]:  # are the oldest version's
            return None
        chosen = min(payload["versions"], key=lambda v: v[0])
    names_then = chosen[1]
    ids_now: dict[str, int] = payload["read"]
    out: dict[str, str | None] = {}
    for name in schema.names:
        fid = ids_now.get(name)
        out[name] = name if fid is None else names_then.get(str(fid))
    return out


def for_write(schema: pa.Schema, versions: Sequence[InternalSchema], instant_hint: int) -> pa.Schema:
    """A write's schema on a table with versions: checked as the commit will record it (a new
    column may not take a name an earlier version gave another column of another type) and
    carrying the ids, so that the files it merges with are read by id."""
    if not versions:
        return schema
    after = evolve(versions[-1], schema, instant_hint, history=versions[:-1])
    # read under the version this write makes: a column it brings back under a dropped name has a
    # new id, so the old files' values of that name are not carried into the files it rewrites
    return attach_versions(schema, after, versions)


def without_versions(schema: pa.Schema) -> pa.Schema:
    meta = {k: v for k, v in (schema.metadata or {}).items() if k != FILE_COLUMNS_KEY}
    return schema.with_metadata(meta) if meta else schema.remove_metadata()
