"""Orders for clustering's layout optimization: linear, Z-order and Hilbert, as Apache Hudi computes them.

Pure (pyarrow and numpy). The sort keys are Apache Hudi's, value for value
(`org.apache.hudi.sort.SpaceCurveSortingHelper`, `org.apache.hudi.common.util.BinaryUtil`,
`org.apache.hudi.optimize.HilbertCurveUtils` over davidmoten's `HilbertCurve`, Skilling's transform):

- **Z-order** (`direct`): each column value becomes 8 bytes that sort as the value does
  (`BinaryUtil.longTo8Byte`, `intTo8Byte`, `doubleTo8Byte`, `utf8To8Byte`: a string's first 8 UTF-8
  bytes, zero-padded on the left; a null becomes the type's MAX_VALUE, "" for strings), and the
  bits of the columns are interleaved, most significant first, column after column
  (`BinaryUtil.interleaving`). Rows sort by the interleaved bytes, unsigned.
- **Hilbert** (`direct`): each value becomes a long (`mapColumnValueToLong`: doubles by their bits,
  strings by their first 8 bytes, nulls Long.MAX_VALUE), and the point's index on a 63-bit Hilbert
  curve of as many dimensions as columns orders the rows (the sign bit plays no part).
- **sample** (`hoodie.layout.optimize.curve.build.method=sample`, Hudi's `RangeSampleSort`): each
  value is replaced by its rank among bounds sampled from the column (nulls rank last), and the
  ranks are ordered on the curve (Z: `intTo8Byte` of the rank; Hilbert: 32 bits). Apache Hudi samples
  at random and spreads a column with fewer bounds than the others at random between its bounds; this
  module takes evenly spaced bounds from the sorted values and does not spread, so its order is
  deterministic.
- One sort column: the curve orders as the column does (Hudi range-partitions by it), so it sorts by it.

Hudi visits the sort columns in the order of a Java `HashMap` keyed by their index in the table schema
(`fieldMap`), not in the order the user listed them: `hashmap_order` reproduces it, and it decides
which column's bit comes first in the interleaving.

Dates and timestamps map through their epoch milliseconds (Hudi's `Date.getTime()`, in UTC here; a
JVM in another time zone shifts dates by its offset).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.config.clustering_config import (
    BUILD_METHODS,
    HILBERT,
    LAYOUT_STRATEGIES,
    LINEAR,
    ZORDER,
    curve_build_method,
    layout_strategy,
)
from engine.errors import InvalidInputError

STRATEGIES = LAYOUT_STRATEGIES
DIRECT, SAMPLE = BUILD_METHODS

_U64 = np.uint64
_SIGN64 = np.uint64(1 << 63)
_LOW63 = np.uint64((1 << 63) - 1)
_LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1
_DOUBLE_MAX = np.finfo(np.float64).max
_FLOAT_MAX = float(np.finfo(np.float32).max)
_MILLIS_PER_DAY = 86_400_000
MAX_ZORDER_COLUMNS = 8  # 8 columns: each byte's bits fill one 64-bit sort word
MAX_HILBERT_COLUMNS = 7  # past 7, Hudi's 63-byte index truncates (BigInteger.toByteArray)


def strategy_name(value: str) -> str:
    """`hoodie.layout.optimize.strategy` as Hudi resolves it (InvalidConfigError otherwise)."""
    return layout_strategy(value)


def build_method(value: str) -> str:
    return curve_build_method(value)


def hashmap_order(indexes: Sequence[int]) -> list[int]:
    """Positions into `indexes` in the order a Java HashMap<Integer, ...> filled in that order
    iterates them: by bucket (the key modulo the table's capacity), then by insertion."""
    capacity = 16
    while len(indexes) > capacity * 0.75:
        capacity *= 2
    return sorted(range(len(indexes)), key=lambda i: (indexes[i] & (capacity - 1), i))


# ---- one column to 64-bit values ----------------------------------------------------------------
def _prefix_value(values: pa.Array) -> np.ndarray:
    """The first 8 bytes of each (binary or UTF-8) value as a big-endian number, shorter values
    zero-padded on the left (`BinaryUtil.paddingTo8Byte`); nulls 0 (the caller decides)."""
    arr = values.cast(pa.large_binary()) if not pa.types.is_large_binary(values.type) else values
    arr = pc.fill_null(arr, b"")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = np.minimum(offsets[1:] - starts, 8)
    out = np.zeros(len(arr), dtype=_U64)
    for j in range(8):
        has = lengths > j
        if not has.any():
            break
        byte = np.zeros(len(arr), dtype=_U64)
        byte[has] = data[starts[has] + j]
        out = np.where(has, (out << _U64(8)) | byte, out)
    return out


def _decimal_longs(values: pa.Array) -> np.ndarray:
    """BigDecimal.longValue(): the integer part, its low 64 bits."""
    out = np.empty(len(values), dtype=_U64)
    for i, v in enumerate(values.to_pylist()):
        out[i] = (int(v) if isinstance(v, Decimal) else _LONG_MAX) & ((1 << 64) - 1)
    return out


def _millis(values: pa.Array) -> np.ndarray:
    """Epoch milliseconds (as int64, nulls Long.MAX_VALUE) of a date or timestamp column."""
    t = values.type
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        days = pc.cast(values.cast(pa.date32()), pa.int32()).to_numpy(zero_copy_only=False)
        ms = np.nan_to_num(days, nan=0).astype(np.int64) * _MILLIS_PER_DAY
    else:
        raw = pc.cast(values, pa.int64()).to_numpy(zero_copy_only=False)
        raw = np.nan_to_num(raw, nan=0).astype(np.int64)
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        ms = raw * 1000 if per_ms is None else np.floor_divide(raw, per_ms)
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, ms, np.int64(_LONG_MAX))


def _ints(values: pa.Array, null: int) -> np.ndarray:
    return np.asarray(pc.fill_null(values, null).to_numpy(zero_copy_only=False)).astype(np.int64)


def _floats(values: pa.Array, null: float) -> np.ndarray:
    return np.asarray(pc.fill_null(values.cast(pa.float64()), null).to_numpy(zero_copy_only=False), dtype=np.float64)


def _long_to_8(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64).view(_U64) ^ _SIGN64


def _int_to_8(v: np.ndarray) -> np.ndarray:
    return ((v.astype(np.int64) + (1 << 31)) & 0xFFFFFFFF).astype(_U64)


def zorder_bytes(values: pa.Array) -> np.ndarray:
    """Hudi's `mapColumnValueTo8Bytes`: the 8 sortable bytes of each value, as a big-endian uint64."""
    t = values.type
    if pa.types.is_int64(t):
        return _long_to_8(_ints(values, _LONG_MAX))
    if pa.types.is_int32(t):
        return _int_to_8(_ints(values, _INT_MAX))
    if pa.types.is_int16(t):
        return _int_to_8(_ints(values, 32767))
    if pa.types.is_int8(t):
        return (_ints(values, 127) & 0xFF).astype(_U64)
    if pa.types.is_float64(t) or pa.types.is_float32(t):
        f = _floats(values, _DOUBLE_MAX if pa.types.is_float64(t) else _FLOAT_MAX)
        bits = f.view(_U64)
        return np.where(f > 0, bits ^ _SIGN64, np.where(f < 0, ~bits, bits))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _prefix_value(values)
    if pa.types.is_boolean(t):
        return _int_to_8(np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=np.int64))
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return _long_to_8(_millis(values))
    if pa.types.is_decimal(t):
        return _decimal_longs(values) ^ _SIGN64
    raise InvalidInputError(f"cannot order by a column of type {t} on a space curve")


def hilbert_long(values: pa.Array) -> np.ndarray:
    """Hudi's `mapColumnValueToLong`, as a uint64 of its 63 low bits (the curve's range)."""
    t = values.type
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t):
        v = _ints(values, 0)
        out = (v & 0xFF).astype(_U64) if pa.types.is_int8(t) else v.view(_U64)
    elif pa.types.is_floating(t):
        f = _floats(values, 0.0)
        out = f.view(_U64).copy()
        out[np.isnan(f)] = _U64(0x7FF8000000000000)  # Double.doubleToLongBits: one NaN
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = _prefix_value(values)
    elif pa.types.is_boolean(t):
        b = np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)
        out = np.where(b, _U64(_LONG_MAX), _U64(0))
    elif pa.types.is_date(t) or pa.types.is_timestamp(t):
        out = _millis(values).view(_U64)
    elif pa.types.is_decimal(t):
        out = _decimal_longs(values)
    else:
        raise InvalidInputError(f"cannot order by a column of type {t} on a space curve")
    return np.where(valid, out, _U64(_LONG_MAX)) & _LOW63


# ---- curves -------------------------------------------------------------------------------------
def packed(words: Sequence[np.ndarray], widths: Sequence[int]) -> list[np.ndarray]:
    """Sort words of the given bit widths (most significant first) packed into as few uint64 words
    as hold them (fewer keys make a much faster sort), in the same order."""
    out: list[np.ndarray] = []
    cur: np.ndarray | None = None
    used = 0
    for w, width in zip(words, widths, strict=True):
        if cur is not None and used + width <= 64:
            cur = (cur << _U64(width)) | w
            used += width
        else:
            if cur is not None:
                out.append(cur)
            cur, used = w.astype(_U64, copy=True), width
    if cur is not None:
        out.append(cur)
    return out


def sorted_order(words: Sequence[np.ndarray]) -> np.ndarray:
    """Stable row order by the words, most significant first."""
    if len(words) == 1:
        return np.argsort(words[0], kind="stable")
    return np.lexsort(tuple(reversed(words)))


def zorder_words(columns: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`BinaryUtil.interleaving` of the columns' 8-byte values, as 8 words (most significant first)
    of 8 * len(columns) bits each: word b holds byte b of every column, bit by bit."""
    k = len(columns)
    if not 1 <= k <= MAX_ZORDER_COLUMNS:
        raise InvalidInputError(f"z-order takes 1 to {MAX_ZORDER_COLUMNS} columns, not {k}")
    spread = np.zeros(256, dtype=_U64)  # bit r (from the top) of a byte -> bit r*k of 8k bits
    for v in range(256):
        s = 0
        for r in range(8):
            if v & (0x80 >> r):
                s |= 1 << (8 * k - 1 - r * k)
        spread[v] = s
    words = []
    for byte in range(8):
        shift = _U64(8 * (7 - byte))
        w = np.zeros(len(columns[0]), dtype=_U64)
        for i, col in enumerate(columns):
            w |= spread[((col >> shift) & _U64(0xFF)).astype(np.intp)] >> _U64(i)
        words.append(w)
    return words


def hilbert_transposed(points: Sequence[np.ndarray], bits: int = 63) -> list[np.ndarray]:
    """Skilling's AxesToTranspose (davidmoten `HilbertCurve.transposedIndex`), vectorized."""
    n = len(points)
    x = [np.asarray(p, dtype=_U64).copy() for p in points]
    q = 1 << (bits - 1)
    while q > 1:
        uq, p = _U64(q), _U64(q - 1)
        for i in range(n):
            hit = (x[i] & uq) != 0
            t = np.where(hit, _U64(0), (x[0] ^ x[i]) & p)
            x[0] = np.where(hit, x[0] ^ p, x[0] ^ t)
            if i:
                x[i] = x[i] ^ t
        q >>= 1
    for i in range(1, n):
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t ^= np.where((x[n - 1] & _U64(q)) != 0, _U64(q - 1), _U64(0))
        q >>= 1
    return [xi ^ t for xi in x]


def hilbert_words(points: Sequence[np.ndarray], bits: int = 63) -> list[np.ndarray]:
    """The Hilbert index of each point (`HilbertCurve.toIndex` of the transposed index: bit level by
    bit level from the top, dimension after dimension) as words to sort by, most significant first."""
    n = len(points)
    if not 2 <= n <= MAX_HILBERT_COLUMNS:
        raise InvalidInputError(f"a Hilbert curve takes 2 to {MAX_HILBERT_COLUMNS} columns, not {n}")
    x = hilbert_transposed(points, bits)
    per_word = 64 // n  # whole bit levels per 64-bit word
    words = []
    level = bits - 1
    while level >= 0:
        take = min(per_word, level + 1)
        w = np.zeros(len(x[0]), dtype=_U64)
        for _ in range(take):
            for j in range(n):
                w = (w << _U64(1)) | ((x[j] >> _U64(level)) & _U64(1))
            level -= 1
        words.append(w)
    return words


def sort_indices(table: pa.Table, columns: Sequence[str], nulls_first: bool) -> np.ndarray:
    """Stable ascending sort indices by `columns`, nulls first (Spark's ascending sort) or last."""
    keys = {}
    sort_keys = []
    for i, c in enumerate(columns):
        col = table.column(c)
        if col.null_count:
            keys[f"n{i}"] = pc.is_valid(col) if nulls_first else pc.is_null(col)
            sort_keys.append((f"n{i}", "ascending"))
        keys[f"v{i}"] = col
        sort_keys.append((f"v{i}", "ascending"))
    return pc.sort_indices(pa.table(keys), sort_keys=sort_keys).to_numpy()


def _ranks(values: pa.Array, sample_size: int) -> np.ndarray:
    """Rank of each value among up to `sample_size` evenly spaced bounds of the column's distinct
    sorted values: how many bounds lie below it (nulls: one past the last bound)."""
    bounds = pc.unique(pc.drop_null(values))
    bounds = bounds.take(pc.sort_indices(bounds))
    if len(bounds) > sample_size:
        bounds = bounds.take(pa.array(np.linspace(0, len(bounds) - 1, sample_size).round().astype(np.int64)))
    n = len(values)
    # values and bounds sorted together, a value before an equal bound: a value's rank is the
    # number of bounds sorted before it
    both = pa.table({
        "v": pa.concat_arrays([values, bounds.cast(values.type)]),
        "bound": pa.concat_arrays([pa.array(np.zeros(n, np.int8)), pa.array(np.ones(len(bounds), np.int8))]),
    })
    idx = sort_indices(both, ["v", "bound"], nulls_first=False)
    is_bound = idx >= n
    below: np.ndarray = np.cumsum(is_bound) - is_bound
    ranks = np.empty(n, dtype=np.int64)
    ranks[idx[~is_bound]] = below[~is_bound]
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, ranks, len(bounds) + 1)


def order(
    table: pa.Table,
    columns: Sequence[str],
    strategy: str,
    *,
    field_indexes: Sequence[int] | None = None,
    method: str = DIRECT,
    sample_size: int = 200_000,
) -> np.ndarray:
    """Row indices of `table` in the order `strategy` lays them out by `columns` (stable: ties keep
    their input order). `field_indexes`: each column's position in the table schema Hudi sees
    (meta fields first), which decides the interleaving order of a space curve."""
    strategy = strategy_name(strategy)
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InvalidInputError(f"sort columns {missing} are not in the table")
    if table.num_rows <= 1 or not columns:
        return np.arange(table.num_rows)
    if strategy == LINEAR or len(columns) == 1:
        return sort_indices(table, columns, nulls_first=True)
    indexes = list(field_indexes) if field_indexes is not None else [table.schema.get_field_index(c) for c in columns]
    cols = [columns[i] for i in hashmap_order(indexes)]
    arrays = [table.column(c).combine_chunks() for c in cols]
    k = len(arrays)
    if build_method(method) == SAMPLE:
        ranks = [_ranks(a, sample_size) for a in arrays]
        if strategy == ZORDER:
            words, widths = zorder_words([_int_to_8(r) for r in ranks]), [8 * k] * 8
        else:
            words = hilbert_words([r.astype(np.int64).view(_U64) for r in ranks], bits=32)
            widths = _hilbert_widths(k, 32)
    elif strategy == ZORDER:
        words, widths = _in_slices(zorder_words, [zorder_bytes(a) for a in arrays]), [8 * k] * 8
    else:
        words, widths = _in_slices(hilbert_words, [hilbert_long(a) for a in arrays]), _hilbert_widths(k, 63)
    return sorted_order(packed(words, widths))


SLICE_ROWS = 65_536  # rows a curve is computed for at once: its many passes stay in the CPU cache


def _in_slices(curve: Callable[[list[np.ndarray]], list[np.ndarray]], columns: list[np.ndarray]) -> list[np.ndarray]:
    """`curve(columns)` computed slice by slice (side by side in threads: numpy releases the GIL),
    the slices' words joined. Measured on 10M rows of two columns: Hilbert 23 s in one pass."""
    n = len(columns[0])
    if n <= SLICE_ROWS:
        return curve(columns)
    import os
    from concurrent.futures import ThreadPoolExecutor

    starts = range(0, n, SLICE_ROWS)
    with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:
        parts = list(pool.map(lambda s: curve([c[s:s + SLICE_ROWS] for c in columns]), starts))
    return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]


def _hilbert_widths(n: int, bits: int) -> list[int]:
    """The bit widths of `hilbert_words`'s words."""
    per_word, left, out = 64 // n, bits, []
    while left > 0:
        take = min(per_word, left)
        out.append(take * n)
        left -= take
    return out


__all__ = [
    "BUILD_METHODS",
    "DIRECT",
    "HILBERT",
    "LINEAR",
    "SAMPLE",
    "STRATEGIES",
    "ZORDER",
    "build_method",
    "hashmap_order",
    "hilbert_long",
    "hilbert_transposed",
    "hilbert_words",
    "order",
    "packed",
    "sorted_order",
    "strategy_name",
    "zorder_bytes",
    "zorder_words",
]
