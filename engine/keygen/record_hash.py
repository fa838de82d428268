"""Hashes of the RECORD index (pure, vectorised over Arrow string arrays; no pyspark).

- Bucketing: Apache Hudi's record index maps a key to one of N shards with Java's
  `String.hashCode` over UTF-16 code units, `Math.abs(Math.abs(h) % N)`
  (`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`), which equals `abs(h % N)` with
  Java's truncated remainder, including for `h == Integer.MIN_VALUE`. That is the default
  (`JAVA_STRING_HASH`); another function can be chosen by name at table creation
  (`hoodie.record.index.hash.function`): a registered name, or `module:function` naming a
  callable `(pa.StringArray) -> np.ndarray` of one integer per key, wrapped to signed 32 bits.
- The same 32-bit hash is the sort key of the index files: they are sorted by (hash, key), so
  a lookup is a numpy binary search over a fixed-width int32 column, then a comparison of the
  key itself (keys whose hashes collide cost time, never correctness).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidConfigError

HashFunction = Callable[[pa.Array], np.ndarray]

# hoodie.properties of RECORD tables (ours; Apache Hudi keeps its shard count in the metadata table)
BUCKETS_PROPERTY = "hoodie.record.index.buckets"
HASH_PROPERTY = "hoodie.record.index.hash.function"
DEFAULT_BUCKETS = 16



def java_string_hash(key: str) -> int:
    """Java's `String.hashCode` (signed 32-bit) over the UTF-16 code units of `key`."""
    h = 0
    data = key.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def bucket_of(h: int, buckets: int) -> int:
    """Apache Hudi's shard of a key whose hash is `h`: `abs(h % N)` with Java's remainder."""
    return abs(h) % buckets


def _string_buffers(keys: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(the array, offsets relative to its first byte, its bytes), zero-copy where possible."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if keys.type == pa.large_string():
        keys = keys.cast(pa.string())
    if keys.type != pa.string():
        raise TypeError(f"record keys must be strings, got {keys.type}")
    if keys.null_count:
        raise ValueError("record keys must not be null")
    _validity, off_buf, data_buf = keys.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int32)[keys.offset : keys.offset + len(keys) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    start = int(offsets[0]) if len(offsets) else 0
    end = int(offsets[-1]) if len(offsets) else 0
    return keys, offsets - start, data[start:end]


def _horner31(matrix: np.ndarray) -> np.ndarray:
    """h = 31 * h + byte over the columns of an (n, L) uint8 matrix, wrapping at 32 bits."""
    h = np.zeros(matrix.shape[0], dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(matrix.shape[1]):
            h = h * np.uint32(31) + matrix[:, j]
    return h


def java_hash_array(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`java_string_hash` of every key (int64 holding signed 32-bit values), vectorised.

    ASCII keys are hashed from their UTF-8 bytes (equal to their UTF-16 code units), one column
    of bytes at a time per group of equally long keys; others go through `java_string_hash`.
    """
    arr, offsets, data = _string_buffers(keys)
    n = len(offsets) - 1
    h = np.zeros(max(n, 0), dtype=np.uint32)
    if n <= 0 or len(data) == 0:
        return h.astype(np.int64)
    lengths = np.diff(offsets)
    uniform = int(lengths[0])
    if (lengths == uniform).all():
        h = _horner31(data.reshape(n, uniform))
    else:
        for length in np.unique(lengths):
            if length == 0:
                continue
            idx = np.flatnonzero(lengths == length)
            h[idx] = _horner31(data[offsets[idx][:, None] + np.arange(length)])
    out = h.astype(np.int32).astype(np.int64)
    if int(data.max()) >= 0x80:
        ascii_mask = pc.string_is_ascii(arr).to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(~ascii_mask):
            out[i] = java_string_hash(arr[int(i)].as_py())
    return out


def _murmur_array(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    from engine.keygen.murmur import murmur_hash

    values = keys.to_pylist()
    return np.array([murmur_hash(k.encode("utf-8"), 0) for k in values], dtype=np.int64)


JAVA_STRING_HASH = "JAVA_STRING_HASH"
HASH_FUNCTIONS: dict[str, HashFunction] = {
    JAVA_STRING_HASH: java_hash_array,
    "MURMUR3_32": _murmur_array,  # Hadoop's MurmurHash of the UTF-8 bytes, seed 0 (as bloom filters)
}


def hash_function(name: str) -> HashFunction:
    """The hash function called `name`: a registered one or a `module:function` import path."""
    found = HASH_FUNCTIONS.get(name.upper()) if ":" not in name else None
    if found is not None:
        return found
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise InvalidConfigError(f"record index hash function {name!r} cannot be imported: {exc}") from exc
        if not callable(fn):
            raise InvalidConfigError(f"record index hash function {name!r} is not callable")
        return _signed_32(fn, name)
    names = ", ".join(sorted(HASH_FUNCTIONS))
    raise InvalidConfigError(f"unknown record index hash function {name!r}: use {names} or module:function")


def _signed_32(fn: HashFunction, name: str) -> HashFunction:
    """`fn` with its results checked (one integer per key) and wrapped to signed 32 bits, the
    width the index files store: a function returning e.g. unsigned 32-bit values (zlib.crc32)
    then buckets and searches with exactly the values its files hold."""

    def wrapped(keys: pa.Array) -> np.ndarray:
        out = np.asarray(fn(keys))
        if out.shape != (len(keys),) or not np.issubdtype(out.dtype, np.integer):
            raise InvalidConfigError(
                f"record index hash function {name!r} must return one integer per key "
                f"(got {out.dtype} of shape {out.shape} for {len(keys)} keys)"
            )
        return out.astype(np.int64).astype(np.int32).astype(np.int64)

    wrapped.__name__ = getattr(fn, "__name__", name)
    return wrapped


def buckets_of(keys: pa.Array | pa.ChunkedArray, buckets: int, hasher: HashFunction = java_hash_array) -> np.ndarray:
    """The bucket (int32) of every key: `abs(h % N)` of its hash."""
    h = np.asarray(hasher(keys), dtype=np.int64)
    return (np.abs(h) % buckets).astype(np.int32)


def record_index_properties(buckets: int | None = None, hash_name: str | None = None) -> tuple[tuple[str, str], ...]:
    """The hoodie.properties entries of a new RECORD table, validated (bucket count, hash name)."""
    n = DEFAULT_BUCKETS if buckets is None else buckets
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InvalidConfigError(f"{BUCKETS_PROPERTY} must be a positive integer, got {buckets!r}")
    name = hash_name or JAVA_STRING_HASH
    hash_function(name)  # unknown names fail at creation, not at the first write
    return ((BUCKETS_PROPERTY, str(n)), (HASH_PROPERTY, name))
