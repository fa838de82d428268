"""Change data capture settings of a table (pure): Apache Hudi's `hoodie.table.cdc.*` properties.

`hoodie.table.cdc.enabled=true` makes every write that rewrites a file group leave a CDC log file
beside it (`HoodieCDCLogger`); `hoodie.table.cdc.supplemental.logging.mode` says what that log
holds (`HoodieCDCSupplementalLoggingMode`):

- `OP_KEY_ONLY`: the operation and the record key; a reader looks both images up in the slices;
- `DATA_BEFORE`: the operation, the key and the image before; the reader looks the after image up;
- `DATA_BEFORE_AFTER` (the default): the operation, the commit time and both images.

Apache Hudi 0.12 wrote the values `cdc_op_key`, `cdc_data_before`, `cdc_data_before_after`; both
spellings are read. Both properties are fixed at table creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from engine.errors import InvalidConfigError

CDC_ENABLED = "hoodie.table.cdc.enabled"
CDC_LOGGING_MODE = "hoodie.table.cdc.supplemental.logging.mode"

# the CDC query's columns (HoodieCDCUtils.CDC_COLUMNS) and the log's key column
OP = "op"
TS_MS = "ts_ms"
BEFORE = "before"
AFTER = "after"
RECORD_KEY = "record_key"
CDC_COLUMNS = (OP, TS_MS, BEFORE, AFTER)
INSERT, UPDATE, DELETE = "i", "u", "d"


class CdcMode(Enum):
    OP_KEY_ONLY = "OP_KEY_ONLY"
    DATA_BEFORE = "DATA_BEFORE"
    DATA_BEFORE_AFTER = "DATA_BEFORE_AFTER"

    @classmethod
    def parse(cls, value: str | CdcMode) -> CdcMode:
        if isinstance(value, CdcMode):
            return value
        text = str(value).strip().upper()
        text = _LEGACY.get(text, text)
        try:
            return cls(text)
        except ValueError:
            raise InvalidConfigError(
                f"{CDC_LOGGING_MODE}={value!r}: use one of {', '.join(m.value for m in cls)}"
            ) from None


_LEGACY = {"CDC_OP_KEY": "OP_KEY_ONLY", "CDC_DATA_BEFORE": "DATA_BEFORE", "CDC_DATA_BEFORE_AFTER": "DATA_BEFORE_AFTER"}


def cdc_mode(props: Mapping[str, str]) -> CdcMode | None:
    """The table's CDC logging mode; None when CDC is off."""
    if str(props.get(CDC_ENABLED, "false")).strip().lower() != "true":
        return None
    return CdcMode.parse(props.get(CDC_LOGGING_MODE) or CdcMode.DATA_BEFORE_AFTER.value)


def cdc_properties(enabled: bool, mode: str | CdcMode | None) -> tuple[tuple[str, str], ...]:
    """The properties a new table states for `enabled` and `mode` (a mode without CDC is refused)."""
    if not enabled:
        if mode is not None:
            raise InvalidConfigError(f"{CDC_LOGGING_MODE} needs {CDC_ENABLED}=true (cdc=True)")
        return ()
    chosen = CdcMode.parse(mode) if mode is not None else CdcMode.DATA_BEFORE_AFTER
    return ((CDC_ENABLED, "true"), (CDC_LOGGING_MODE, chosen.value))


def cdc_log_schema(mode: CdcMode, data_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The Avro schema of a CDC log block's records (`HoodieCDCUtils.schemaBySupplementalLoggingMode`)
    for a table whose data record schema (no meta fields) is `data_schema`."""
    if mode is CdcMode.OP_KEY_ONLY:
        return {
            "type": "record",
            "name": "Record",
            "fields": [
                {"name": OP, "type": ["string", "null"]},
                {"name": RECORD_KEY, "type": ["string", "null"]},
            ],
        }
    namespace = data_schema.get("namespace")
    full_name = f"{namespace}.{data_schema['name']}" if namespace else str(data_schema["name"])
    nullable_string = ["null", "string"]

    def field(name: str, type_: Any) -> dict[str, Any]:
        return {"name": name, "type": type_, "doc": "", "default": None}

    before = field(BEFORE, ["null", dict(data_schema)])
    if mode is CdcMode.DATA_BEFORE:
        fields = [field(OP, nullable_string), field(RECORD_KEY, nullable_string), before]
    else:
        after = field(AFTER, ["null", full_name])  # the second use of a named record is by name
        fields = [field(OP, nullable_string), field(TS_MS, nullable_string), before, after]
    out: dict[str, Any] = {"type": "record", "name": "CDC", "doc": "", "fields": fields}
    if namespace:
        out["namespace"] = namespace
    return out


__all__ = [
    "AFTER", "BEFORE", "CDC_COLUMNS", "CDC_ENABLED", "CDC_LOGGING_MODE", "DELETE", "INSERT", "OP", "RECORD_KEY",
    "TS_MS", "UPDATE", "CdcMode", "cdc_log_schema", "cdc_mode", "cdc_properties",
]
