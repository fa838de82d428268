"""Apache Hudi's secondary indexes (`secondary_index_<name>` partitions of the metadata table):
secondary value -> record keys, as Hudi 1.x writes them (`SecondaryIndexKeyUtils`,
`HoodieMetadataPayload.createSecondaryIndexRecord`). Pure: values in, keys and records out.

One record (type 7) per live record of the data table: keyed `<secondary value>$<record key>`,
each part escaped (a backslash before `\\`, `$` and NUL; a null value is a lone NUL), holding
`SecondaryIndexMetadata {isDeleted: false}`; a removed entry is a key in a DELETE block. The value
is the text of the column's value as Spark holds it (`Object.toString` of its internal value:
strings as they are, integers in decimal, a date as its days since the epoch, a timestamp as its
microseconds, a decimal as `BigDecimal.toString`, a boolean as true/false). Floating-point and
binary columns are not kept (Java's float text is not reproduced here).

A key goes to file group `abs(abs(String.hashCode(s)) % N)` of the partition's N groups
(`<partition with - for _>-0000-0` ...), `s` being the escaped value and the `$` for index version
V2 (all keys of one value in one group), the whole key for V1.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pyarrow as pa

from engine.metadata import record_index as ri

Record = dict[str, Any]
RECORD_TYPE = 7
PREFIX = "secondary_index_"
NULL = "\x00"
SEPARATOR = "$"
_ESCAPE = "\\"
_EPOCH_DAY = dt.date(1970, 1, 1)


class UnsupportedValue(ValueError):
    """A column whose values this engine cannot render as Hudi's secondary keys."""


# every live entry's value (shared: entries of one value encode to the same bytes, encoded once)
_LIVE = {"isDeleted": False}


def escape(text: str | None) -> str:
    if text is None:
        return NULL
    return "".join(_ESCAPE + c if c in (_ESCAPE, SEPARATOR, NULL) else c for c in text)


def unescape(text: str) -> str | None:
    if text == NULL:
        return None
    out, escaped = [], False
    for c in text:
        if escaped or c != _ESCAPE:
            out.append(c)
            escaped = False
        else:
            escaped = True
    return "".join(out)


def _separator_at(key: str) -> int:
    escaped = False
    for i, c in enumerate(key):
        if c == _ESCAPE and not escaped:
            escaped = True
        elif c == SEPARATOR and not escaped:
            return i
        else:
            escaped = False
    raise ValueError(f"{key!r} is no secondary index key (no unescaped $)")


def key(secondary: str | None, record_key: str) -> str:
    """`constructSecondaryIndexKey`."""
    return escape(secondary) + SEPARATOR + escape(record_key)


def split(index_key: str) -> tuple[str | None, str]:
    """(secondary value, record key) of an index key."""
    at = _separator_at(index_key)
    record_key = unescape(index_key[at + 1:])
    return unescape(index_key[:at]), record_key if record_key is not None else NULL


def hashed_part(index_key: str, version: str) -> str:
    """What picks the key's file group: the escaped value and `$` (V2), or the whole key (V1)."""
    return index_key[: _separator_at(index_key) + 1] if version.upper() != "V1" else index_key


def file_groups_of(keys: list[str], count: int, version: str) -> np.ndarray:
    if count == 1:
        return np.zeros(len(keys), dtype=np.int64)
    return ri.file_groups_of([hashed_part(k, version) for k in keys], count)


def group_prefix(partition: str) -> str:
    """`secondary_index_merchant_idx` -> `secondary-index-merchant-idx-`."""
    return partition.replace("_", "-") + "-"


def record(index_key: str) -> Record:
    return {"key": index_key, "type": RECORD_TYPE, "SecondaryIndexMetadata": _LIVE}


def supports(t: pa.DataType) -> bool:
    """Whether values of Arrow type `t` are rendered here as Hudi renders them."""
    return any(check(t) for check in (
        pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean,
        pa.types.is_date32, pa.types.is_timestamp, pa.types.is_decimal))


def texts(values: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """The secondary-key text of each value (None for a null)."""
    t = values.type
    if not supports(t):
        raise UnsupportedValue(f"a secondary index on a column of type {t}")
    if pa.types.is_timestamp(t):
        per = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}[t.unit]
        raw = values.cast(pa.int64())
        if per is None:
            return [None if v is None else str(v // 1_000) for v in raw.to_pylist()]
        return [None if v is None else str(v * per) for v in raw.to_pylist()]
    out: list[str | None] = []
    for v in values.to_pylist():
        out.append(None if v is None else _text(v))
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return str((value - _EPOCH_DAY).days)
    if isinstance(value, decimal.Decimal):
        return str(value)  # the to-scientific-string rules Java's BigDecimal.toString follows
    return str(value)


__all__ = [
    "NULL", "PREFIX", "RECORD_TYPE", "UnsupportedValue", "escape", "file_groups_of", "group_prefix", "hashed_part",
    "key", "record", "split", "supports", "texts", "unescape",
]
