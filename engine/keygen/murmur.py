"""Hadoop's MurmurHash as Apache Hudi's bloom filters use it: one key at a time in pure Python,
and the chained hashes of many keys at once with numpy (from Python bytes or straight from an
Arrow string array's buffers). Pure: no Spark, no I/O.

A key's ``k`` bit positions chain the hash: ``h = murmur(utf8(key), seed=h_prev)`` from seed 0,
position ``abs(h % size)`` in Java int arithmetic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from engine.errors import InvalidInputError

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF

Keys: TypeAlias = "Iterable[str] | pa.Array | pa.ChunkedArray"


def int32(value: int) -> int:
    value &= _MASK
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def _sext8(byte: int) -> int:
    return byte - 256 if byte > 127 else byte


def murmur_hash(data: bytes, seed: int) -> int:
    """Hadoop's ``MurmurHash.hash(data, data.length, seed)`` as a Java int (signed 32-bit).

    This is Hadoop's MurmurHash2 variant, tail bytes and all: for 2 or 3 trailing bytes it
    mixes them in the reverse order of the reference C code, and sign-extends each byte.
    """
    length = len(data)
    h = (seed ^ length) & _MASK
    len4 = length >> 2
    for i in range(len4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    left = length - (len4 << 2)
    if left:
        if left >= 3:
            h ^= (_sext8(data[length - 3]) << 16) & _MASK
        if left >= 2:
            h ^= (_sext8(data[length - 2]) << 8) & _MASK
        h ^= _sext8(data[length - 1]) & _MASK
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return int32(h)


def key_bytes(key: str) -> bytes:
    if key is None:
        raise InvalidInputError("bloom filter key cannot be null")
    data = key.encode("utf-8")
    if not data:  # Hudi's HashFunction: "key length must be > 0"
        raise InvalidInputError("bloom filter key cannot be empty")
    return data


def bit_positions(data: bytes, nb_hash: int, vector_size: int) -> list[int]:
    """HashFunction.hash: the `nb_hash` bit positions of one key (pure Python)."""
    out = []
    h = 0
    for _ in range(nb_hash):
        h = murmur_hash(data, h)
        out.append(abs(h) % vector_size)  # == Math.abs(h % size): Java's % truncates toward zero
    return out


def bit_positions_batch(keys: Sequence[bytes], nb_hash: int, vector_size: int) -> np.ndarray:
    """The bit positions of many keys at once, shape ``(len(keys), nb_hash)``, uint32."""
    return hash_chain(keys, nb_hash) % np.uint32(vector_size)


def hash_chain(keys: Sequence[bytes], nb_hash: int) -> np.ndarray:
    """``abs(h_i)`` of the chained murmur hashes of many keys, shape ``(len(keys), nb_hash)``.

    Independent of the filter's bit count, so a lookup can hash its keys once and test them
    against many files' filters (position = chain % vector size).

    Keys are grouped by byte length so each group is a 2-D byte array; the block mixing
    (``k *= m; k ^= k >>> 24; k *= m``) and the tail bytes do not depend on the seed, so they
    are computed once per key and only the ``h`` chain runs ``nb_hash`` times.
    """
    out = np.empty((len(keys), nb_hash), dtype=np.uint32)
    by_length: dict[int, list[int]] = {}
    for i, data in enumerate(keys):
        by_length.setdefault(len(data), []).append(i)
    for length, rows in by_length.items():
        buf = np.frombuffer(b"".join(keys[i] for i in rows), dtype=np.uint8).reshape(len(rows), length)
        out[np.asarray(rows, dtype=np.int64)] = _chain_group(buf, nb_hash)
    return out


CHUNK_KEYS = 65_536  # keys hashed at once (measured: 2M keys, 30 hashes: 3.0 s in one pass, 0.47 s in these)


def hash_chain_arrow(keys: pa.Array | pa.ChunkedArray, nb_hash: int, modulo: int | None = None) -> np.ndarray:
    """`hash_chain` of an Arrow string (or binary) array, read from its buffers without making
    Python objects (Arrow strings are UTF-8 already). InvalidInputError for a null or empty key.
    With `modulo`: each hash modulo it (a bloom filter's bit positions). uint32 either way (a hash
    is |int32| <= 2^31): 30 hashes of 100k keys take 12 MB."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    out = np.empty((len(arr), nb_hash), dtype=np.uint32)
    if len(arr) > CHUNK_KEYS:
        # in slices that keep the hashing's working set in the CPU cache (each of its 30-odd rounds
        # passes over every key several times), hashed side by side in threads (numpy releases the
        # GIL), each into its rows of `out`
        from concurrent.futures import ThreadPoolExecutor

        def chunk(start: int) -> None:
            _hash_chain_arrow(arr.slice(start, CHUNK_KEYS), nb_hash, out[start : start + CHUNK_KEYS])

        starts = range(0, len(arr), CHUNK_KEYS)
        with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:
            list(pool.map(chunk, starts))
    else:
        _hash_chain_arrow(arr, nb_hash, out)
    if modulo is not None:
        out %= np.uint32(modulo)
    return out


def _hash_chain_arrow(arr: pa.Array, nb_hash: int, out: np.ndarray) -> None:
    """The chains of `arr`'s keys written into `out` (its rows, uint32)."""
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.large_binary())
        offset_type: type[np.signedinteger] = np.int64
    else:
        arr = arr.cast(pa.binary())
        offset_type = np.int32
    if arr.null_count:
        raise InvalidInputError("bloom filter key cannot be null")
    if len(arr) == 0:
        return
    _validity, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if (lengths == 0).any():  # Hudi's HashFunction: "key length must be > 0"
        raise InvalidInputError("bloom filter key cannot be empty")
    for length, rows in _rows_by_length(lengths):
        buf = data[offsets[rows][:, None] + np.arange(length, dtype=np.int64)]
        out[rows] = _chain_group(buf, nb_hash)


def _rows_by_length(lengths: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_lengths)) + 1).tolist(), len(order)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        yield int(sorted_lengths[start]), order[start:end]


def _chain_group(buf: np.ndarray, nb_hash: int) -> np.ndarray:
    """The chain of keys of one byte length, given as the rows of a 2-D uint8 array."""
    n, length = buf.shape
    out = np.empty((n, nb_hash), dtype=np.uint32)
    m = np.uint32(_M)
    len4 = length >> 2
    words = np.ascontiguousarray(buf[:, : len4 * 4]).view("<u4").astype(np.uint32)
    mixed = words * m
    mixed ^= mixed >> np.uint32(24)
    mixed *= m
    blocks = [np.ascontiguousarray(mixed[:, j]) for j in range(len4)]
    left = length - len4 * 4
    tail: np.ndarray | None = None
    if left:
        # Java sign-extends each tail byte to an int before shifting it
        extended = buf[:, len4 * 4 :].view(np.int8).astype(np.int32).view(np.uint32)
        tail = np.zeros(n, dtype=np.uint32)
        for j in range(left):  # byte at len - left + j is shifted by 8 * (left - 1 - j)
            tail ^= extended[:, j] << np.uint32(8 * (left - 1 - j))
    seed = np.zeros(n, dtype=np.uint32)
    for r in range(nb_hash):
        h = seed ^ np.uint32(length)
        for block in blocks:
            h *= m
            h ^= block
        if tail is not None:
            h ^= tail
            h *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
        seed = h
        out[:, r] = np.abs(h.view(np.int32).astype(np.int64))  # |int32| <= 2^31 fits uint32
    return out


def key_chain(keys: Keys, nb_hash: int) -> np.ndarray:
    """`hash_chain` of keys given as an Arrow array or as Python strings."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return hash_chain_arrow(keys, nb_hash)
    return hash_chain(encode_keys(keys), nb_hash)


def key_positions(keys: Keys, nb_hash: int, vector_size: int) -> np.ndarray:
    """Each key's `nb_hash` bit positions in a filter of `vector_size` bits (`key_chain` modulo it)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return hash_chain_arrow(keys, nb_hash, vector_size)
    return hash_chain(encode_keys(keys), nb_hash) % np.uint32(vector_size)


def encode_keys(keys: Iterable[str]) -> list[bytes]:
    """Keys as the bytes the filters hash (UTF-8; null or empty keys are refused)."""
    return [key_bytes(k) for k in keys]


__all__ = [
    "Keys",
    "bit_positions",
    "bit_positions_batch",
    "encode_keys",
    "hash_chain",
    "hash_chain_arrow",
    "int32",
    "key_bytes",
    "key_chain",
    "key_positions",
    "murmur_hash",
]
