"""Column changes under schema on read: rename, drop, move, widen (``Table.alter``, ``hoodie alter``).

Each change applies to the table's top-level columns, in the order given; the result is the new
table schema and, for every renamed column, its name before the changes (so the internal schema
keeps its id). A change that would leave readers unable to tell the records apart or find them is
refused with :class:`SchemaChangeError` before anything is written: renaming or dropping a record
key, precombine (ordering) or partition field or a meta column; a name that is taken; narrowing or
incompatible type changes (the widenings allowed are those of writes: int -> long/float/double,
long -> float/double, float -> double, decimals keeping their integer digits and scale).

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.errors import SchemaChangeError, SchemaMismatchError
from engine.schema.avro import META_FIELDS, normalize_for_write, type_from_name
from engine.schema.evolution import promote

__all__ = ["ChangeType", "Drop", "Move", "Rename", "apply_changes", "parse_type"]


@dataclass(frozen=True)
class Rename:
    old: str
    new: str

    def describe(self) -> str:
        return f"rename {self.old} to {self.new}"


@dataclass(frozen=True)
class Drop:
    name: str

    def describe(self) -> str:
        return f"drop {self.name}"


@dataclass(frozen=True)
class ChangeType:
    name: str
    type: pa.DataType

    def describe(self) -> str:
        return f"change {self.name} to {self.type}"


@dataclass(frozen=True)
class Move:
    """Put `name` first, or right after / before another column."""

    name: str
    first: bool = False
    after: str | None = None
    before: str | None = None

    def __post_init__(self) -> None:
        if sum([self.first, self.after is not None, self.before is not None]) != 1:
            raise SchemaChangeError(f"move {self.name}: give exactly one of first, after, before")

    def describe(self) -> str:
        where = "first" if self.first else f"after {self.after}" if self.after else f"before {self.before}"
        return f"move {self.name} {where}"


Change = Rename | Drop | ChangeType | Move

DELETE_MARKER = "_hoodie_is_deleted"  # a record with true here is a delete (older log blocks too)
RESERVED_PREFIX = "__hoodie_"  # writes refuse input columns named so

def parse_type(text: str) -> pa.DataType:
    """A column type as written on the command line: int, long, float, double, string, boolean,
    date, binary, decimal(p,s) (`engine.schema.avro.type_from_name`)."""
    try:
        return type_from_name(text)
    except ValueError:
        raise SchemaChangeError(
            f"unknown column type {text!r} (int, long, float, double, string, boolean, date, binary, decimal(p,s))"
        ) from None


def apply_changes(
    schema: pa.Schema, changes: Sequence[Change], protected: Mapping[str, str]
) -> tuple[pa.Schema, dict[str, str]]:
    """The schema after `changes` and {new name: name before the changes} of renamed columns.
    `protected`: column -> why it may be neither renamed nor dropped (nor retyped)."""
    if not changes:
        raise SchemaChangeError("no change given")
    fields = list(schema)
    origin = {f.name: f.name for f in fields}  # current name -> name before the changes
    for change in changes:
        names = [f.name for f in fields]

        def at(name: str, change: Change = change, names: list[str] = names) -> int:
            if name not in names:
                raise SchemaChangeError(f"{change.describe()}: the table has no column '{name}' (columns: {', '.join(names)})")
            return names.index(name)

        def guard(name: str, change: Change = change) -> None:
            if name in META_FIELDS:
                raise SchemaChangeError(f"{change.describe()}: {name} is a meta column Apache Hudi fills in")
            if name in protected:
                raise SchemaChangeError(f"{change.describe()}: '{name}' is the table's {protected[name]}")
            if name == DELETE_MARKER:
                raise SchemaChangeError(
                    f"{change.describe()}: {DELETE_MARKER} marks deleted records; changing it would turn the "
                    "deletes older files hold into records")

        if isinstance(change, Rename):
            i = at(change.old)
            guard(change.old)
            taken = {n.lower() for n in names if n != change.old} | {m.lower() for m in META_FIELDS}
            if change.new.lower() in taken:
                raise SchemaChangeError(f"{change.describe()}: a column named '{change.new}' exists")
            if change.new.lower().startswith(RESERVED_PREFIX) or change.new.lower() == DELETE_MARKER:
                raise SchemaChangeError(
                    f"{change.describe()}: '{change.new}' is a name Apache Hudi reserves "
                    f"({DELETE_MARKER} marks deletes, {RESERVED_PREFIX}* are internal columns)"
                )
            try:
                normalize_for_write(pa.schema([pa.field(change.new, pa.int32())]))
            except SchemaMismatchError as exc:
                raise SchemaChangeError(f"{change.describe()}: {exc}") from exc
            fields[i] = fields[i].with_name(change.new)
            origin[change.new] = origin.pop(change.old)
        elif isinstance(change, Drop):
            i = at(change.name)
            guard(change.name)
            if len([f for f in fields if f.name not in META_FIELDS]) == 1:
                raise SchemaChangeError(f"{change.describe()}: it is the table's last column")
            del fields[i]
            origin.pop(change.name)
        elif isinstance(change, ChangeType):
            i = at(change.name)
            guard(change.name)
            old_type = fields[i].type
            try:
                widened = promote(change.type, old_type, change.name, [], fill_missing=False)
            except SchemaMismatchError as exc:
                raise SchemaChangeError(f"{change.describe()}: {exc}") from exc
            if widened != change.type:
                raise SchemaChangeError(
                    f"{change.describe()}: column '{change.name}' is {old_type}; only widening changes "
                    f"are allowed ({change.type} would narrow it)"
                )
            fields[i] = fields[i].with_type(change.type)
        else:
            i = at(change.name)
            moved = fields.pop(i)
            rest = [f.name for f in fields]
            if change.first:
                j = 0
            else:
                anchor = change.after or change.before or ""
                if anchor not in rest:
                    raise SchemaChangeError(f"{change.describe()}: the table has no other column '{anchor}'")
                j = rest.index(anchor) + (1 if change.after else 0)
            fields.insert(j, moved)
    renamed = {new: old for new, old in origin.items() if new != old}
    return pa.schema(fields), renamed
