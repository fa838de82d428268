"""Apache Hudi's bloom filters, byte for byte: the filters carried in base-file footers.

Owns the two filter types Hudi writes (``SIMPLE`` and ``DYNAMIC_V0``), Hadoop's MurmurHash
(the only hash Hudi uses), the Java ``DataOutput`` serialisation and its Base64 text, and the
parquet footer entries. Pure: no Spark; numpy does the bulk hashing.

Ported from ``org.apache.hudi.common.bloom`` (``SimpleBloomFilter``,
``HoodieDynamicBoundedBloomFilter``, ``InternalDynamicBloomFilter``, ``InternalBloomFilter``,
``InternalFilter``, ``HashFunction``, ``BloomFilterUtils``) and Hadoop's
``org.apache.hadoop.util.hash.MurmurHash``. Serialised form (big-endian):

* filter header: int32 version (-1), int32 number of hashes, int8 hash type (1 = murmur),
  int32 vector size in bits; a SIMPLE filter follows it with ``ceil(size / 8)`` bytes where
  bit ``i`` is ``byte[i // 8] & (1 << (i % 8))``;
* DYNAMIC_V0: the header, int32 entries per row, int32 keys in the active row, int32 rows,
  then each row as a SIMPLE filter.

A key's ``k`` bit positions chain the hash: ``h = murmur(utf8(key), seed=h_prev)`` from seed 0,
position ``abs(h % size)`` in Java int arithmetic. Bit positions do not depend on the order
keys are added; only which row of a DYNAMIC_V0 filter a key lands in does, and Hudi adds the
keys in the order the rows are written to the file.
"""

from __future__ import annotations

import binascii
import math
import os
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pybase64

from engine.constants import FOOTER_BLOOM_FILTER, FOOTER_BLOOM_FILTER_TYPE
from engine.errors import CorruptTableError, InvalidInputError
from engine.keygen.murmur import (
    CHUNK_KEYS,
    Keys,
    bit_positions,
    bit_positions_batch,
    int32,
    key_bytes,
    key_chain,
    key_positions,
    murmur_hash,
)

TYPE_SIMPLE = "SIMPLE"
TYPE_DYNAMIC_V0 = "DYNAMIC_V0"
# keys hashed per step when adding many (each hashed slice of CHUNK_KEYS runs in a thread of its own)
KEYS_PER_STEP = CHUNK_KEYS * max(1, os.cpu_count() or 1)
# Hudi still reads filters written under the pre-Apache key.
OLD_FOOTER_BLOOM_FILTER = "com.uber.hoodie.bloomfilter"

JENKINS_HASH = 0
MURMUR_HASH = 1

# Hudi's defaults: hoodie.index.bloom.num_entries, hoodie.index.bloom.fpp,
# hoodie.bloom.index.filter.dynamic.max.entries.
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 1e-9
DEFAULT_MAX_ENTRIES = 100_000

_VERSION = -1  # InternalFilter.VERSION: negative, to tell it from the old non-versioned format
_HEADER = struct.Struct(">iibi")
_INT = struct.Struct(">i")
_LOG2_SQUARED = math.log(2) * math.log(2)


def bit_size(num_entries: int, fpp: float) -> int:
    """``BloomFilterUtils.getBitSize``: bits for `num_entries` keys at false-positive rate `fpp`."""
    return int(math.ceil(num_entries * (-math.log(fpp) / _LOG2_SQUARED)))


def num_hashes(bits: int, num_entries: int) -> int:
    """``BloomFilterUtils.getNumHashes``: hash functions for `bits` bits and `num_entries` keys."""
    return int(math.ceil(math.log(2) * bits / num_entries))


def _sizing(num_entries: int, fpp: float) -> tuple[int, int]:
    if num_entries <= 0:
        raise InvalidInputError(f"bloom filter entries must be > 0, got {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise InvalidInputError(f"bloom filter false-positive rate must be in (0, 1), got {fpp}")
    bits = bit_size(num_entries, fpp)
    if bits > 0x7FFF_FFFF:
        raise InvalidInputError(f"bloom filter of {bits} bits does not fit a Java int")
    return bits, num_hashes(bits, num_entries)


class _BitRow:
    """One standard filter (Hudi's InternalBloomFilter / Hadoop's BloomFilter): header + bit vector."""

    __slots__ = ("_bits", "_packed", "hash_type", "nb_hash", "vector_size")

    def __init__(
        self,
        vector_size: int,
        nb_hash: int,
        hash_type: int,
        bits: np.ndarray | None = None,
        packed: np.ndarray | None = None,
    ):
        if vector_size <= 0:
            raise InvalidInputError("bloom filter vector size must be > 0")
        if nb_hash <= 0:
            raise InvalidInputError("bloom filter hash count must be > 0")
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        # a row read from a footer stays packed (little-endian bit order, as stored) until a key is
        # added to it: lookups test bits in the packed bytes, sparing the unpacking of every row
        self._packed = packed
        self._bits: np.ndarray | None = None
        if packed is None:
            self._bits = np.zeros(vector_size, dtype=bool) if bits is None else bits

    @property
    def bits(self) -> np.ndarray:
        """The bit vector, one bool per bit (unpacked on first use)."""
        if self._bits is None:
            assert self._packed is not None
            self._bits = np.unpackbits(self._packed, bitorder="little")[: self.vector_size].astype(bool)
            self._packed = None
        return self._bits

    def packed(self) -> np.ndarray:
        """The bit vector packed as stored (little-endian bit order; bits past the end are zero
        once written)."""
        if self._bits is None:
            assert self._packed is not None
            return self._packed
        return np.packbits(self._bits, bitorder="little")

    def test(self, pos: np.ndarray) -> np.ndarray:
        """The bits at positions `pos` (any shape), as bools."""
        if self._bits is not None:
            return self._bits[pos]
        assert self._packed is not None
        return ((self._packed[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1).astype(bool)

    def check_hash(self) -> None:
        if self.hash_type != MURMUR_HASH:
            raise InvalidInputError(
                f"bloom filter hash type {self.hash_type} is not supported (only murmur, 1)"
            )

    def positions(self, data: bytes) -> list[int]:
        self.check_hash()
        return bit_positions(data, self.nb_hash, self.vector_size)

    def positions_batch(self, keys: Sequence[bytes]) -> np.ndarray:
        self.check_hash()
        return bit_positions_batch(keys, self.nb_hash, self.vector_size)

    def contains_positions(self, pos: Sequence[int] | np.ndarray) -> bool:
        return bool(self.test(np.asarray(pos, dtype=np.int64)).all())

    def write(self, out: bytearray) -> None:
        out += _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size)
        if self._bits is None:
            assert self._packed is not None
            packed = bytearray(self._packed.tobytes())
            if self.vector_size % 8:  # bits past the vector's end are not part of it
                packed[-1] &= (1 << (self.vector_size % 8)) - 1
            out += packed
        else:
            out += np.packbits(self._bits, bitorder="little").tobytes()

    @classmethod
    def read(cls, buf: bytes, offset: int) -> tuple[_BitRow, int]:
        nb_hash, hash_type, vector_size, offset = _read_header(buf, offset)
        nbytes = (vector_size + 7) // 8
        if vector_size <= 0 or nb_hash <= 0 or offset + nbytes > len(buf):
            raise CorruptTableError("truncated or invalid bloom filter bit vector")
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=offset)
        return cls(vector_size, nb_hash, hash_type, packed=raw), offset + nbytes


def _key_slices(keys: Keys) -> Iterator[Keys]:
    """`keys` in slices of at most KEYS_PER_STEP (Arrow arrays sliced, other iterables listed):
    the bit positions of one slice (30-odd uint32 per key) are set and dropped before the next
    is hashed, so a file of millions of keys (clustering, bulk inserts) never holds them all."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = keys if isinstance(keys, list) else list(keys)
    for start in range(0, len(keys), KEYS_PER_STEP):
        yield keys[start : start + KEYS_PER_STEP] if isinstance(keys, list) else keys.slice(start, KEYS_PER_STEP)


def _read_int(buf: bytes, offset: int) -> tuple[int, int]:
    if offset + 4 > len(buf):
        raise CorruptTableError("truncated bloom filter")
    return _INT.unpack_from(buf, offset)[0], offset + 4


def _read_header(buf: bytes, offset: int) -> tuple[int, int, int, int]:
    """InternalFilter.readFields: (nb_hash, hash_type, vector_size, next offset)."""
    version, offset = _read_int(buf, offset)
    if version > 0:  # old non-versioned format: the first int is the hash count, Jenkins hash
        nb_hash, hash_type = version, JENKINS_HASH
    elif version == _VERSION:
        nb_hash, offset = _read_int(buf, offset)
        if offset + 1 > len(buf):
            raise CorruptTableError("truncated bloom filter")
        hash_type = struct.unpack_from(">b", buf, offset)[0]
        offset += 1
    else:
        raise CorruptTableError(f"unsupported bloom filter version {version}")
    vector_size, offset = _read_int(buf, offset)
    return nb_hash, hash_type, vector_size, offset


def _decode(text: str | bytes) -> bytes:
    # pybase64 (SIMD): a footer's filter is ~430 KB of Base64 at Hudi's default sizing, which
    # binascii decodes in ~2.3 ms and pybase64 in ~0.05 ms; validate=True rejects what is not
    # Base64 as binascii's strict mode does
    try:
        data = text.encode("ascii") if isinstance(text, str) else text
        return pybase64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CorruptTableError(f"bloom filter is not valid Base64: {exc}") from exc


def _encode(raw: bytearray) -> bytes:
    return pybase64.b64encode(raw)


class SimpleBloomFilter:
    """Hudi's ``SimpleBloomFilter`` (type code ``SIMPLE``): one fixed-size bit vector."""

    type_code = TYPE_SIMPLE

    def __init__(self, vector_size: int, nb_hash: int, hash_type: int = MURMUR_HASH):
        self._row = _BitRow(vector_size, nb_hash, hash_type)

    @classmethod
    def create(cls, num_entries: int, fpp: float) -> SimpleBloomFilter:
        """A filter sized as Hudi sizes it for `num_entries` keys at false-positive rate `fpp`."""
        bits, hashes = _sizing(num_entries, fpp)
        return cls(bits, hashes)

    @property
    def vector_size(self) -> int:
        return self._row.vector_size

    @property
    def num_hashes(self) -> int:
        return self._row.nb_hash

    def add(self, key: str) -> None:
        """Add one key (its UTF-8 bytes)."""
        self._row.bits[self._row.positions(key_bytes(key))] = True

    def add_all(self, keys: Keys) -> None:
        """Add many keys (Python strings or an Arrow string array); same result as `add` on each,
        vectorised (in slices: see `_key_slices`)."""
        self._row.check_hash()
        for part in _key_slices(keys):
            pos = key_positions(part, self._row.nb_hash, self._row.vector_size)
            if len(pos):
                self._row.bits[pos.ravel()] = True

    def might_contain(self, key: str) -> bool:
        """False only if `key` was certainly never added."""
        return self._row.contains_positions(self._row.positions(key_bytes(key)))

    def might_contain_many(self, keys: Iterable[str]) -> list[bool]:
        """`might_contain` for each key, vectorised."""
        encoded = [key_bytes(k) for k in keys]
        if not encoded:
            return []
        hits: np.ndarray = np.asarray(self._row.test(self._row.positions_batch(encoded)).all(axis=1), dtype=bool)
        return [bool(v) for v in hits]

    def contains_chain(self, chain: np.ndarray) -> np.ndarray:
        """`might_contain` for keys given by their `hash_chain` (bool array)."""
        self._row.check_hash()
        return np.asarray(self._row.test(chain % np.uint32(self._row.vector_size)).all(axis=1), dtype=bool)

    def serialize(self) -> str:
        """The Base64 text Hudi stores in the footer."""
        return self.serialized().decode("ascii")

    def serialized(self) -> bytes:
        """`serialize` as ASCII bytes (what the footer stores, without a str in between)."""
        out = bytearray()
        self._row.write(out)
        return _encode(out)

    @classmethod
    def deserialize(cls, text: str | bytes) -> SimpleBloomFilter:
        """Parse the footer text (CorruptTableError if it is not a filter)."""
        row, _ = _BitRow.read(_decode(text), 0)  # like Java, trailing bytes are ignored
        result = cls.__new__(cls)
        result._row = row
        return result


class DynamicBloomFilter:
    """Hudi's ``HoodieDynamicBoundedBloomFilter`` (type code ``DYNAMIC_V0``).

    Rows of `num_entries` keys each; a full row starts a new one while ``rows * num_entries <
    max_entries``. Past that bound (Hudi's ``reachedMax``) keys go to row 0 once, then round-robin
    over all rows, and the false-positive rate is no longer guaranteed. With the defaults
    (60,000 / 100,000) a filter has at most 2 rows.

    As in Java, the bound is not serialised: a deserialised filter has ``max_entries == 0``, so
    adding to one whose active row is full spreads keys over the existing rows.
    """

    type_code = TYPE_DYNAMIC_V0

    def __init__(
        self,
        vector_size: int,
        nb_hash: int,
        entries_per_row: int,
        max_entries: int,
        hash_type: int = MURMUR_HASH,
        first: _BitRow | None = None,
    ):
        self.vector_size = vector_size
        self.num_hashes = nb_hash
        self.hash_type = hash_type
        self.entries_per_row = entries_per_row
        self.max_entries = max_entries
        self.current_count = 0  # keys in the active row (currentNbRecord)
        self._reached_max = False
        self._cur_index = 0
        # `first`: the first row given (its bits already set), sparing the allocation of an empty one
        self._rows = [first if first is not None else _BitRow(vector_size, nb_hash, hash_type)]

    @classmethod
    def create(
        cls,
        num_entries: int = DEFAULT_NUM_ENTRIES,
        fpp: float = DEFAULT_FPP,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> DynamicBloomFilter:
        """A filter sized as Hudi sizes it: rows for `num_entries` keys at `fpp`, growing to `max_entries`."""
        bits, hashes = _sizing(num_entries, fpp)
        return cls(bits, hashes, num_entries, max_entries)

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def _assign_rows(self, n: int) -> np.ndarray:
        """Which row each of the next `n` keys goes to (InternalDynamicBloomFilter.getActiveStandardBF)."""
        out = np.empty(n, dtype=np.int64)
        i = 0
        nr = self.entries_per_row
        while i < n:
            if self._reached_max:
                out[i:] = np.arange(self._cur_index, self._cur_index + n - i) % len(self._rows)
                self._cur_index += n - i
                self.current_count += n - i
                break
            if self.current_count >= nr:
                if int32(len(self._rows) * nr) < self.max_entries:
                    self._rows.append(_BitRow(self.vector_size, self.num_hashes, self.hash_type))
                    self.current_count = 0
                else:
                    self._reached_max = True
                    out[i] = 0
                    self.current_count += 1
                    i += 1
                    continue
            take = min(n - i, nr - self.current_count)
            out[i : i + take] = len(self._rows) - 1
            self.current_count += take
            i += take
        return out

    def add(self, key: str) -> None:
        """Add one key (its UTF-8 bytes) to the active row."""
        data = key_bytes(key)
        pos = self._rows[0].positions(data)
        row = int(self._assign_rows(1)[0])
        self._rows[row].bits[pos] = True

    def add_all(self, keys: Keys) -> None:
        """Add keys (Python strings or an Arrow string array) in order; same result as `add` on
        each, vectorised."""
        self._rows[0].check_hash()
        for part in _key_slices(keys):
            pos = key_positions(part, self.num_hashes, self.vector_size)
            if not len(pos):
                continue
            rows = self._assign_rows(len(pos))  # in order: slice after slice, as `add` would
            if len(self._rows) == 1:
                self._rows[0].bits[pos.ravel()] = True
                continue
            for r in np.unique(rows):
                self._rows[int(r)].bits[pos[rows == r].ravel()] = True

    def might_contain(self, key: str) -> bool:
        """True if any row might hold `key`."""
        pos = self._rows[0].positions(key_bytes(key))
        return any(row.contains_positions(pos) for row in self._rows)

    def might_contain_many(self, keys: Iterable[str]) -> list[bool]:
        """`might_contain` for each key, vectorised."""
        encoded = [key_bytes(k) for k in keys]
        if not encoded:
            return []
        pos = self._rows[0].positions_batch(encoded)
        hit = np.zeros(len(encoded), dtype=bool)
        for row in self._rows:
            hit |= row.test(pos).all(axis=1)
        return hit.tolist()

    def contains_chain(self, chain: np.ndarray) -> np.ndarray:
        """`might_contain` for keys given by their `hash_chain` (bool array)."""
        self._rows[0].check_hash()
        pos = chain % np.uint32(self.vector_size)  # uint32 chains (`hash_chain_arrow`) stay uint32
        hit = np.zeros(len(chain), dtype=bool)
        for row in self._rows:
            hit |= row.test(pos).all(axis=1)
        return hit

    def serialize(self) -> str:
        """The Base64 text Hudi stores in the footer."""
        return self.serialized().decode("ascii")

    def serialized(self) -> bytes:
        """`serialize` as ASCII bytes (what the footer stores, without a str in between)."""
        out = bytearray(_HEADER.pack(_VERSION, self.num_hashes, self.hash_type, self.vector_size))
        out += struct.pack(">iii", self.entries_per_row, int32(self.current_count), len(self._rows))
        for row in self._rows:
            row.write(out)
        return _encode(out)

    @classmethod
    def deserialize(cls, text: str | bytes) -> DynamicBloomFilter:
        """Parse the footer text (CorruptTableError if it is not a filter)."""
        buf = _decode(text)
        nb_hash, hash_type, vector_size, offset = _read_header(buf, 0)
        nr, offset = _read_int(buf, offset)
        current, offset = _read_int(buf, offset)
        count, offset = _read_int(buf, offset)
        if vector_size <= 0 or nb_hash <= 0 or count <= 0:
            raise CorruptTableError("invalid dynamic bloom filter header")
        rows = []
        for _ in range(count):
            row, offset = _BitRow.read(buf, offset)
            rows.append(row)
        result = cls.__new__(cls)
        result.vector_size, result.num_hashes, result.hash_type = vector_size, nb_hash, hash_type
        result.entries_per_row, result.max_entries, result.current_count = nr, 0, current
        result._reached_max, result._cur_index, result._rows = False, 0, rows
        return result


BloomFilter = SimpleBloomFilter | DynamicBloomFilter


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def parse_bloom_filter(text: str | bytes, type_code: str = TYPE_SIMPLE) -> BloomFilter:
    """``BloomFilterFactory.fromString``: a filter from its Base64 text and type code."""
    if type_code == TYPE_SIMPLE:
        return SimpleBloomFilter.deserialize(text)
    if type_code == TYPE_DYNAMIC_V0:
        return DynamicBloomFilter.deserialize(text)
    raise CorruptTableError(f"unknown bloom filter type code {type_code!r}")


def bloom_filter_from_footer(
    metadata: Mapping[bytes, bytes] | Mapping[str, str] | None,
) -> BloomFilter | None:
    """The filter in a parquet file's key-value metadata, or None if it carries none.

    Reads ``org.apache.hudi.bloomfilter`` (or the old ``com.uber.hoodie.bloomfilter``); the type
    code defaults to SIMPLE when ``hoodie_bloom_filter_type_code`` is absent, as in Hudi.
    """
    if not metadata:
        return None
    entries = {_text(k): v for k, v in metadata.items()}
    value = entries.get(FOOTER_BLOOM_FILTER, entries.get(OLD_FOOTER_BLOOM_FILTER))
    if value is None:
        return None
    type_code = entries.get(FOOTER_BLOOM_FILTER_TYPE)
    return parse_bloom_filter(value, TYPE_SIMPLE if type_code is None else _text(type_code))


def footer_entries(bloom: BloomFilter) -> dict[str, bytes]:
    """The footer key-value entries Hudi writes for `bloom` (values as bytes: handing parquet the
    ~430 KB filter as bytes spares encoding a str of that size while holding the GIL)."""
    return {FOOTER_BLOOM_FILTER: bloom.serialized(), FOOTER_BLOOM_FILTER_TYPE: bloom.type_code.encode("ascii")}


def extended_for_keys(
    previous: BloomFilter | None,
    previous_keys: int,
    added: Keys,
    total_keys: int,
    num_entries: int = DEFAULT_NUM_ENTRIES,
    fpp: float = DEFAULT_FPP,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> DynamicBloomFilter | None:
    """The filter `build_for_keys` would build for a file holding the `previous_keys` keys of a
    file whose filter is `previous` plus the keys `added` (`total_keys` in all), built by adding
    only `added` to a copy of `previous`; None when that would not be byte-identical to a fresh
    build (then build from scratch).

    Identical when both are one row of the same sizing: a row is the union of its keys' bits,
    whatever their order, and its count is the number of keys added. So: `previous` is one
    DYNAMIC_V0 row sized for (`num_entries`, `fpp`) counting exactly `previous_keys` keys, and
    `total_keys` fits in a row. The caller guarantees that every previous key is still in the
    file (no deletes)."""
    if not isinstance(previous, DynamicBloomFilter) or previous.num_rows != 1:
        return None
    bits, hashes = _sizing(num_entries, fpp)
    if (previous.vector_size, previous.num_hashes, previous.entries_per_row) != (bits, hashes, num_entries):
        return None
    if previous.hash_type != MURMUR_HASH or previous.current_count != previous_keys or total_keys > num_entries:
        return None
    chain = key_chain(added, hashes)
    if previous_keys + len(chain) != total_keys:
        return None
    # the keys' bits set in the packed bytes (little-endian bit order, as stored): no unpacking
    packed = previous._rows[0].packed().copy()
    if len(chain):
        pos = (chain % np.uint32(bits)).ravel()
        np.bitwise_or.at(packed, pos >> 3, np.left_shift(1, pos & 7).astype(np.uint8))
    out = DynamicBloomFilter(bits, hashes, num_entries, max_entries, first=_BitRow(bits, hashes, MURMUR_HASH, packed=packed))
    out.current_count = total_keys  # one row holds every key: its count is theirs
    return out


def build_for_keys(
    keys: Keys,
    num_entries: int = DEFAULT_NUM_ENTRIES,
    fpp: float = DEFAULT_FPP,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> DynamicBloomFilter:
    """The filter Hudi writes for a base file (DYNAMIC_V0; defaults `hoodie.index.bloom.num_entries`
    60000, `hoodie.index.bloom.fpp` 1e-9, `hoodie.bloom.index.filter.dynamic.max.entries` 100000),
    holding `keys` added in the order given (pass them in the order the rows are written)."""
    bloom = DynamicBloomFilter.create(num_entries, fpp, max_entries)
    bloom.add_all(keys)
    return bloom


__all__ = [
    "DEFAULT_FPP",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_NUM_ENTRIES",
    "OLD_FOOTER_BLOOM_FILTER",
    "TYPE_DYNAMIC_V0",
    "TYPE_SIMPLE",
    "BloomFilter",
    "DynamicBloomFilter",
    "SimpleBloomFilter",
    "bit_size",
    "bloom_filter_from_footer",
    "build_for_keys",
    "extended_for_keys",
    "footer_entries",
    "murmur_hash",
    "num_hashes",
    "parse_bloom_filter",
]
