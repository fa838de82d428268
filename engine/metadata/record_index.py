"""Apache Hudi's record-level index in the metadata table (the `record_index` partition), pure:
which file group of the partition holds a key, and how a record's location is encoded.

- the partition has N file groups `record-index-0000-0` ... (N is fixed when Hudi builds it);
  a record key goes to group `abs(abs(String.hashCode(key)) % N)`
  (`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`);
- a record (type 5) is keyed by the record key (a complex key as `field:value,...`, as the
  data files' `_hoodie_record_key` holds it) and its `recordIndexMetadata` names the location:
  the data partition path, the file id and the instant (epoch milliseconds) the key was
  written there. A file id `<uuid>-<n>` (every id Hudi and this engine write) is encoded as the
  UUID's two 64-bit halves, signed, and n (`fileIdEncoding` 0; a bare UUID has n = -1); any
  other as its text (1, the halves and n -1). Hudi turns the instant into milliseconds in its
  JVM's time zone; this engine's instants are UTC, and so are its milliseconds;
- a deleted key is a key of a DELETE block (`engine.metadata.reader` resets it).

Checked against every record index in the fixture tables Apache Hudi 1.x wrote
(`tests/unit/test_metadata_record_index_format.py`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import numpy as np
import pyarrow as pa

from engine.keygen.record_hash import bucket_of, java_hash_array, java_string_hash
from engine.metadata import records as mdr
from engine.timeline.instant import is_valid_instant_time, parse_instant_time

FILE_GROUP_PREFIX = "record-index-"
ENCODING_UUID = 0
ENCODING_RAW = 1
_UUID_TEXT = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_UUID = re.compile(f"^{_UUID_TEXT}$")
_UUID_FILE_ID = re.compile(rf"^({_UUID_TEXT})-(\d+)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NO_FILE_INDEX = -1  # a file id that is a bare UUID, or one stored as text
_MASK64 = (1 << 64) - 1


def file_group_id(index: int) -> str:
    """The file id of the `index`-th file group of the partition."""
    return f"{FILE_GROUP_PREFIX}{index:04d}-0"


def file_group_of(key: str, count: int) -> int:
    """The index of the file group holding `key` among `count` groups."""
    if count <= 0:
        raise ValueError("the record index has no file group")
    return bucket_of(java_string_hash(key), count)


def file_groups_of(keys: list[str] | pa.Array, count: int) -> np.ndarray:
    """`file_group_of` every key (vectorised)."""
    if count <= 0:
        raise ValueError("the record index has no file group")
    hashes = java_hash_array(keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string()))
    return np.abs(hashes) % count  # |h| as int64, so Integer.MIN_VALUE needs no special case


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def instant_millis(instant: str) -> int:
    """The instant's epoch milliseconds, as this engine's instants are made (UTC)."""
    if not is_valid_instant_time(instant):
        raise ValueError(f"not an instant time: {instant!r}")
    return (parse_instant_time(instant) - _EPOCH) // timedelta(milliseconds=1)


@dataclass(frozen=True)
class Location:
    """Where the record index says a key is."""

    partition: str
    file_id: str
    instant_millis: int


def encode(partition: str, file_id: str, instant: str) -> dict:
    """`recordIndexMetadata` of a key written to `file_id` in `partition` at `instant`
    (`HoodieMetadataPayload.createRecordIndexUpdate`). A fresh dict; `location_record` shares one
    per location."""
    return dict(_encoded(partition, file_id, instant))


@lru_cache(maxsize=4096)
def _encoded(partition: str, file_id: str, instant: str) -> dict:
    m = _UUID_FILE_ID.match(file_id)
    if m or _UUID.match(file_id):
        bits = uuid.UUID(m[1] if m else file_id).int
        high, low, text, encoding = _signed(bits >> 64), _signed(bits & _MASK64), "", ENCODING_UUID
        index = int(m[2]) if m else NO_FILE_INDEX
    else:
        high, low, index, text, encoding = -1, -1, NO_FILE_INDEX, file_id, ENCODING_RAW
    return {
        "partitionName": partition, "fileIdHighBits": high, "fileIdLowBits": low, "fileIndex": index,
        "fileId": text, "instantTime": instant_millis(instant), "fileIdEncoding": encoding, "position": None,
    }


def decode(info: dict) -> Location:
    """The location a `recordIndexMetadata` names (`HoodieTableMetadataUtil.getLocationFromRecordIndexInfo`)."""
    if info.get("fileIdEncoding") == ENCODING_RAW:
        file_id = str(info.get("fileId"))
    else:
        bits = ((int(info["fileIdHighBits"]) & _MASK64) << 64) | (int(info["fileIdLowBits"]) & _MASK64)
        index = int(info["fileIndex"])
        file_id = str(uuid.UUID(int=bits)) + ("" if index == NO_FILE_INDEX else f"-{index}")
    return Location(str(info.get("partitionName") or ""), file_id, int(info.get("instantTime") or 0))


def location_record(key: str, partition: str, file_id: str, instant: str) -> mdr.Record:
    """The record-index record of `key` at (`partition`, `file_id`), written at `instant`."""
    return {"key": key, "type": mdr.TYPE_RECORD_INDEX, "recordIndexMetadata": _encoded(partition, file_id, instant)}


__all__ = [
    "ENCODING_RAW", "ENCODING_UUID", "FILE_GROUP_PREFIX", "NO_FILE_INDEX", "Location", "decode", "encode", "file_group_id",
    "file_group_of", "file_groups_of", "instant_millis", "location_record",
]
