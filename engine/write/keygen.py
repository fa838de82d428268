"""Record keys and partition paths (pure), following Apache Hudi's key generators.

- Simple key (one field): the value as a string; null or empty is an error.
- Complex key (`ComplexKeyGenerator`): `f1:v1,f2:v2`; a null part is `__null__`, an empty one
  `__empty__`; all parts null/empty is an error.
- Partition path: the partition fields' values joined with `/`, each `field=value` when
  hive-style; a null or empty value becomes `__HIVE_DEFAULT_PARTITION__`. Non-partitioned: "".
- Timestamp-based (`TimestampBasedKeyGenerator`): a simple record key; the one partition field's
  value read as a time and printed with the table's output date format
  (`engine.write.timestamp_keys`), `field=` before it when hive-style.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.config.table_config import TIMESTAMP_KEYGEN, TableConfig
from engine.constants import DEFAULT_PARTITION_PATH, EMPTY_RECORD_KEY_PLACEHOLDER, NULL_RECORD_KEY_PLACEHOLDER
from engine.errors import InvalidConfigError, InvalidInputError
from engine.write import timestamp_keys
from engine.write.timestamp_keys import TimestampKeySpec


@dataclass(frozen=True)
class KeySpec:
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    complex_keys: bool = False
    timestamp: TimestampKeySpec | None = None  # the timestamp-based key generator's partitioning
    virtual: bool = False  # no meta fields: stored rows' keys are computed from the key fields

    @classmethod
    def from_config(cls, config: TableConfig, options: Iterable[tuple[str, str]] = ()) -> KeySpec:
        """The table's keys; InvalidConfigError where its key generator's options are unusable.

        `options`: the writer's `hoodie.keygen.timebased.*` options, which complete the table's
        (Apache Hudi 0.x tables keep only some in hoodie.properties); a value the table states
        differently is refused."""
        timestamp = None
        if config.keygen_class == TIMESTAMP_KEYGEN:
            if len(config.partition_fields) != 1 or len(config.record_key_fields) != 1:
                raise InvalidConfigError(
                    "the timestamp-based key generator takes one record key field and one partition field, not "
                    f"{list(config.record_key_fields)} and {list(config.partition_fields)}"
                )
            props = dict(config.extra)
            for key, value in options:
                if key in props and props[key] != value:
                    raise InvalidConfigError(f"write option {key}={value!r} differs from the table's {props[key]!r}")
                props[key] = value
            timestamp = TimestampKeySpec.from_properties(props)
        return cls(
            record_key_fields=config.record_key_fields,
            partition_fields=config.partition_fields,
            hive_style=config.hive_style,
            complex_keys=config.uses_complex_keys,
            timestamp=timestamp,
            virtual=not config.populate_meta_fields,
        )

    @property
    def fields(self) -> tuple[str, ...]:
        """Every input column the keys need, record key fields first."""
        return self.record_key_fields + tuple(f for f in self.partition_fields if f not in self.record_key_fields)


def value_to_string(value: Any) -> str | None:
    """How a key value renders as text (Spark's string cast for the common types)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


def _key_text(column: pa.ChunkedArray | pa.Array, field: str) -> pa.Array:
    kind = column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
            or pa.types.is_boolean(kind)):
        raise InvalidConfigError(
            f"record key field {field!r} is {kind}: keys computed from the key fields (tables without "
            "meta fields) take string, integer or boolean fields"
        )
    text = pc.cast(column, pa.string())
    return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text


def key_array(spec: KeySpec, table: pa.Table) -> pa.Array:
    """The record keys of stored rows computed from their key fields, exactly as `record_key` (and
    the write's Spark expression) render them: for tables without meta fields, whose files leave
    `_hoodie_record_key` null. A null key stays null."""
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        return _key_text(table.column(field), field)
    parts = []
    for field in spec.record_key_fields:
        text = _key_text(table.column(field), field)
        shown = pc.if_else(pc.is_null(text), NULL_RECORD_KEY_PLACEHOLDER,
                           pc.if_else(pc.equal(text, ""), EMPTY_RECORD_KEY_PLACEHOLDER, text))
        parts.append(pc.binary_join_element_wise(f"{field}:", shown, ""))
    return pc.binary_join_element_wise(*parts, ",")


def partition_path(spec: KeySpec, row: Mapping[str, Any]) -> str:
    """The partition path of `row` (row at a time; the write computes it on Spark the same way)."""
    if spec.timestamp is not None:
        (field,) = spec.partition_fields
        return timestamp_keys.partition_path(spec.timestamp, row.get(field), field if spec.hive_style else None)
    segments = []
    for field in spec.partition_fields:
        text = value_to_string(row.get(field))
        if text is None or text == "":
            text = DEFAULT_PARTITION_PATH
        segments.append(f"{field}={text}" if spec.hive_style else text)
    return "/".join(segments)
