"""Record keys and partition paths (pure), following Apache Hudi's key generators.

- Simple key (one field): the value as text (`engine.keygen.values`); null or empty is an error.
- Complex key (`ComplexKeyGenerator`): `f1:v1,f2:v2`; a null part is `__null__`, an empty one
  `__empty__`; all parts null/empty is an error.
- Auto-generated keys (a table naming no record key field, Apache Hudi 0.14+): the writer names
  each new record `<instant>_<task>_<row>`; an update or delete carries `_hoodie_record_key`.
- Partition path: the partition fields' values joined with `/`, each `field=value` when
  hive-style; a null or empty value becomes `__HIVE_DEFAULT_PARTITION__`; with
  `hoodie.datasource.write.partitionpath.urlencode` each value is escaped as Apache Hudi's
  `PartitionPathEncodeUtils.escapePathName` escapes it (before the `field=` prefix, after the
  default). Non-partitioned: "".
- Timestamp-based (`TimestampBasedKeyGenerator`): a simple record key; the one partition field's
  value read as a time and printed with the table's output date format (`engine.keygen.timestamp`).
- Custom (`CustomKeyGenerator`): each partition field is SIMPLE or TIMESTAMP (`field:TYPE`), the
  TIMESTAMP ones printed as the timestamp-based generator prints them; the record key is simple
  for one key field, complex for more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.config.table_config import CUSTOM_KEYGEN, TIMESTAMP_KEYGEN, TableConfig
from engine.constants import (
    DEFAULT_PARTITION_PATH,
    EMPTY_RECORD_KEY_PLACEHOLDER,
    NULL_RECORD_KEY_PLACEHOLDER,
    RECORD_KEY_COL,
)
from engine.errors import InvalidConfigError, InvalidInputError
from engine.keygen import timestamp as timestamp_keys
from engine.keygen.timestamp import TimestampKeySpec
from engine.keygen.values import CONSISTENT_TIMESTAMPS, texts

AUTO_KEY = "__hoodie_auto_key__"  # a new record of a table with auto-generated keys, before its task names it
SIMPLE_PART = "SIMPLE"
TIMESTAMP_PART = "TIMESTAMP"
PARTITION_PATH_FIELD = "hoodie.datasource.write.partitionpath.field"
# PartitionPathEncodeUtils.escapePathName: 0x00-0x1F, the characters below, 0x7F; as %XX (upper case)
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list('"#%\'*/:=?\\{[]^') + [chr(0x7F)])


@dataclass(frozen=True)
class KeySpec:
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    complex_keys: bool = False
    timestamp: TimestampKeySpec | None = None  # the timestamp-based generator's (or TIMESTAMP parts') options
    virtual: bool = False  # no meta fields: stored rows' keys are computed from the key fields
    # per partition field, SIMPLE or TIMESTAMP (custom key generator; timestamp-based: one TIMESTAMP)
    partition_kinds: tuple[str, ...] = ()
    url_encode: bool = False  # hoodie.datasource.write.partitionpath.urlencode
    consistent_timestamps: bool = False  # ...keygenerator.consistent.logical.timestamp.enabled
    auto: bool = False  # auto-generated record keys (the table names no record key field)

    @classmethod
    def from_config(cls, config: TableConfig, options: Iterable[tuple[str, str]] = ()) -> KeySpec:
        """The table's keys; InvalidConfigError where its key generator's options are unusable.

        `options`: the writer's `hoodie.keygen.timebased.*` options, which complete the table's
        (Apache Hudi 0.x tables keep only some in hoodie.properties; a custom generator's are kept
        nowhere), its typed `hoodie.datasource.write.partitionpath.field` (a version 6 custom
        table's types) and the timestamp rendering option; a value the table states differently is refused."""
        given = dict(options)
        props = dict(config.extra)
        timebased = {k: v for k, v in given.items() if k.startswith(timestamp_keys.PREFIX)}
        for key, value in timebased.items():
            if key in props and props[key] != value:
                raise InvalidConfigError(f"write option {key}={value!r} differs from the table's {props[key]!r}")
            props[key] = value
        timestamp = None
        kinds: tuple[str, ...] = ()
        if config.keygen_class == TIMESTAMP_KEYGEN:
            if len(config.partition_fields) != 1 or len(config.record_key_fields) > 1:
                raise InvalidConfigError(
                    "the timestamp-based key generator takes one record key field and one partition field, not "
                    f"{list(config.record_key_fields)} and {list(config.partition_fields)}"
                )
            timestamp = TimestampKeySpec.from_properties(props)
            kinds = (TIMESTAMP_PART,)
        elif config.keygen_class == CUSTOM_KEYGEN:
            kinds = custom_partition_kinds(config, given.get(PARTITION_PATH_FIELD) or props.get(PARTITION_PATH_FIELD))
            if TIMESTAMP_PART in kinds:
                timestamp = TimestampKeySpec.from_properties(props)
        consistent = given.get(CONSISTENT_TIMESTAMPS, props.get(CONSISTENT_TIMESTAMPS, "false")).strip().lower() == "true"
        complex_keys = config.uses_complex_keys and not (
            config.keygen_class == CUSTOM_KEYGEN and len(config.record_key_fields) == 1)
        return cls(
            record_key_fields=config.record_key_fields,
            partition_fields=config.partition_fields,
            hive_style=config.hive_style,
            complex_keys=complex_keys,
            timestamp=timestamp,
            virtual=not config.populate_meta_fields,
            partition_kinds=kinds,
            url_encode=config.url_encode,
            consistent_timestamps=consistent,
            auto=config.auto_keys,
        )

    @property
    def fields(self) -> tuple[str, ...]:
        """Every input column the keys need, record key fields first."""
        return self.record_key_fields + tuple(f for f in self.partition_fields if f not in self.record_key_fields)

    def kind(self, i: int) -> str:
        """SIMPLE or TIMESTAMP: how partition field `i` becomes a path segment."""
        return self.partition_kinds[i] if self.partition_kinds else SIMPLE_PART


def custom_partition_kinds(config: TableConfig, written: str | None) -> tuple[str, ...]:
    """A custom key generator's part types: the table's (versions 8, 9), else the writer's typed
    `hoodie.datasource.write.partitionpath.field` (version 6 tables keep the names only)."""
    stated = tuple(t.upper() for t in config.partition_types) if any(config.partition_types) else None
    if written is not None:
        specs = [f.strip() for f in written.split(",") if f.strip()]
        names = tuple(f.partition(":")[0].strip() for f in specs)
        types = tuple(f.partition(":")[2].strip().upper() for f in specs)
        if names != config.partition_fields:
            raise InvalidConfigError(
                f"{PARTITION_PATH_FIELD}={written!r} names other partition fields than the table's "
                f"{', '.join(config.partition_fields)}")
        if stated is not None and types != stated:
            raise InvalidConfigError(f"{PARTITION_PATH_FIELD}={written!r} differs from the table's types "
                                     f"{','.join(f'{n}:{t}' for n, t in zip(names, stated, strict=True))}")
        stated = types
    if not config.partition_fields:
        return ()
    if stated is None or not all(stated):
        raise InvalidConfigError(
            "a CustomKeyGenerator table of version 6 keeps its partition fields without their types: write "
            f"with {PARTITION_PATH_FIELD}=" + ",".join(f"{f}:SIMPLE|TIMESTAMP" for f in config.partition_fields)
            + " (as Apache Hudi's writers of such a table do)")
    bad = [t for t in stated if t not in (SIMPLE_PART, TIMESTAMP_PART)]
    if bad:
        raise InvalidConfigError(
            f"custom key generator part type(s) {', '.join(bad)}: use SIMPLE or TIMESTAMP (`field:type`)")
    return stated


def check_auto_key_write(where: str, operation: str, columns: Iterable[str], index: str, index_stores_locations: bool) -> None:
    """A write to a table with auto-generated keys: new records are named by their writing task;
    updates and deletes name the records by their `_hoodie_record_key` (rows read from the table,
    as Apache Hudi's quick start writes them); indexes that store locations are not kept."""
    if operation.upper() in ("UPSERT", "DELETE") and RECORD_KEY_COL not in set(columns):
        raise InvalidInputError(
            f"{where} has auto-generated record keys (it names no record key field): an {operation.lower()} "
            f"names the records it changes by their {RECORD_KEY_COL} column (read them from the table, change them, "
            "write them back); new records go in with insert or bulk_insert")
    if index_stores_locations:
        raise InvalidConfigError(
            f"index {index} is not kept for a table with auto-generated record keys ({where}): use BLOOM or SIMPLE")


def escape_path_name(text: str) -> str:
    """Apache Hudi's `PartitionPathEncodeUtils.escapePathName`."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def escape_path_names(values: pa.Array) -> pa.Array:
    """`escape_path_name` of every value (nulls stay null)."""
    out = pc.replace_substring(values, "%", "%25")
    for c in sorted(_ESCAPED - {"%"}):
        out = pc.replace_substring(out, c, f"%{ord(c):02X}")
    return out


def value_to_string(value: Any) -> str | None:
    """How one key or partition value renders as text (`engine.keygen.values`)."""
    if value is None:
        return None
    return str(texts(pa.array([value]))[0].as_py())


def record_key(spec: KeySpec, row: Mapping[str, Any]) -> str:
    """The record key of `row`; raises InvalidInputError for a null/empty key."""
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        text = value_to_string(row.get(field))
        if text is None or text == "":
            raise InvalidInputError(f"record key field {field!r} is null or empty")
        return text
    parts, all_missing = [], True
    for field in spec.record_key_fields:
        text = value_to_string(row.get(field))
        if text is None:
            text = NULL_RECORD_KEY_PLACEHOLDER
        elif text == "":
            text = EMPTY_RECORD_KEY_PLACEHOLDER
        else:
            all_missing = False
        parts.append(f"{field}:{text}")
    if all_missing:
        raise InvalidInputError(f"all record key fields {list(spec.record_key_fields)} are null or empty")
    return ",".join(parts)


def _key_text(column: pa.ChunkedArray | pa.Array, field: str, consistent: bool = False) -> pa.Array:
    return texts(column, consistent)


def key_array(spec: KeySpec, table: pa.Table) -> pa.Array:
    """The record keys of stored rows computed from their key fields, exactly as `record_key` (and
    the write's Spark expression) render them: for tables without meta fields, whose files leave
    `_hoodie_record_key` null. A null key stays null."""
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        return _key_text(table.column(field), field, spec.consistent_timestamps)
    return _complex_keys(spec, _field_texts(spec, table))


def _field_texts(spec: KeySpec, table: pa.Table) -> list[pa.Array]:
    return [_key_text(table.column(f), f, spec.consistent_timestamps) for f in spec.record_key_fields]


def _complex_keys(spec: KeySpec, texts: list[pa.Array]) -> pa.Array:
    """`field:value,...` of every row from its key fields' texts (placeholders for null and empty)."""
    parts = []
    for field, text in zip(spec.record_key_fields, texts, strict=True):
        shown = pc.if_else(pc.is_null(text), NULL_RECORD_KEY_PLACEHOLDER,
                           pc.if_else(pc.equal(text, ""), EMPTY_RECORD_KEY_PLACEHOLDER, text))
        parts.append(pc.binary_join_element_wise(f"{field}:", shown, ""))
    return pc.binary_join_element_wise(*parts, ",")


def delete_columns(spec: KeySpec, pc_field: str | None) -> list[str]:
    """The input columns a delete writes: the key and partition fields (and the precombine field)."""
    cols = list(spec.fields)
    if pc_field and pc_field not in cols:
        cols.append(pc_field)
    return cols


def record_keys(spec: KeySpec, table: pa.Table) -> pa.Array:
    """The record key of every input row, as the write's Spark expression computes it
    (`engine.keygen.spark_keys.record_key_expr`): null where the key is invalid (a null or empty
    simple key; every field of a complex key null or empty). Auto-generated keys: the rows'
    `_hoodie_record_key` when present, else AUTO_KEY (named when written)."""
    if spec.auto:
        if RECORD_KEY_COL not in table.column_names:
            return pa.array([AUTO_KEY] * table.num_rows, pa.string())
        return _null_if_empty(pc.cast(table.column(RECORD_KEY_COL), pa.string()))
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        return _null_if_empty(_key_text(table.column(field), field, spec.consistent_timestamps))
    texts = _field_texts(spec, table)  # rendered once: for the key and for its validity
    all_missing = None
    for text in texts:
        missing = pc.fill_null(pc.equal(text, ""), True)
        all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
    return pc.if_else(all_missing, pa.scalar(None, pa.string()), _complex_keys(spec, texts))


def _null_if_empty(text: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    return pc.if_else(pc.fill_null(pc.equal(arr, ""), True), pa.scalar(None, pa.string()), arr)


def partition_path(spec: KeySpec, row: Mapping[str, Any]) -> str:
    """The partition path of `row` (row at a time; the write computes it on Spark the same way)."""
    columns = {f: pa.array([row.get(f)]) for f in spec.partition_fields}
    return str(partition_paths(spec, columns)[0].as_py()) if spec.partition_fields else ""


def partition_paths(spec: KeySpec, columns: Mapping[str, pa.Array]) -> pa.Array:
    """The partition path of every row of `columns` (partition field -> values), vectorised: what
    the write's Spark tasks compute (`engine.keygen.spark_keys.partition_path_expr`)."""
    segments = []
    for i, field in enumerate(spec.partition_fields):
        values = columns[field]
        if spec.kind(i) == TIMESTAMP_PART:
            assert spec.timestamp is not None
            text = timestamp_keys.partition_paths(spec.timestamp, values)
        else:
            text = texts(values, spec.consistent_timestamps)
            text = pc.if_else(pc.fill_null(pc.equal(text, ""), True), DEFAULT_PARTITION_PATH, text)
        if spec.url_encode:
            text = escape_path_names(text)
        if spec.hive_style:
            text = pc.binary_join_element_wise(pa.scalar(f"{field}="), text, "")
        segments.append(text)
    return pc.binary_join_element_wise(*segments, "/")
