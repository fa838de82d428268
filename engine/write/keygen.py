"""Record keys and partition paths (pure), following Apache Hudi's key generators.

- Simple key (one field): the value as a string; null or empty is an error.
- Complex key (`ComplexKeyGenerator`): `f1:v1,f2:v2`; a null part is `__null__`, an empty one
  `__empty__`; all parts null/empty is an error.
- Partition path: the partition fields' values joined with `/`, each `field=value` when
  hive-style; a null or empty value becomes `__HIVE_DEFAULT_PARTITION__`. Non-partitioned: "".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.table_config import TableConfig
from engine.constants import DEFAULT_PARTITION_PATH, EMPTY_RECORD_KEY_PLACEHOLDER, NULL_RECORD_KEY_PLACEHOLDER
from engine.errors import InvalidInputError


@dataclass(frozen=True)
class KeySpec:
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    complex_keys: bool = False

    @classmethod
    def from_config(cls, config: TableConfig) -> KeySpec:
        return cls(
            record_key_fields=config.record_key_fields,
            partition_fields=config.partition_fields,
            hive_style=config.hive_style,
            complex_keys=config.uses_complex_keys,
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


def partition_path(spec: KeySpec, row: Mapping[str, Any]) -> str:
    segments = []
    for field in spec.partition_fields:
        text = value_to_string(row.get(field))
        if text is None or text == "":
            text = DEFAULT_PARTITION_PATH
        segments.append(f"{field}={text}" if spec.hive_style else text)
    return "/".join(segments)
