"""The merge rules of a file slice, vectorised: which log record or delete wins per key, and whether
it beats the base file's record. Pure numpy/pyarrow on whole columns; no I/O.

The rules are hudi-rs 0.5's (its default file-group reader, v2; see docs/format-notes.md):

- COMMIT_TIME: the last event (data record or delete) in log order wins, and a log record
  always replaces the base record; a delete removes it.
- EVENT_TIME, folding each key's events in log order into a state, then merging with the base:
  - a data record replaces the state unless both carry an ordering value and the state's is
    strictly greater (ties go to the later record);
  - a natural-order delete (ordering IntWrapper(0) or null: "commit-time-ordering delete") always
    replaces the state, and a state that is one ignores later deletes;
  - any other delete replaces the state unless both carry an ordering value and the state's is
    strictly greater;
  - the base record survives only if the state is not a natural-order delete and both carry an
    ordering value with the base's strictly greater.

Ordering values are compared only within one class, as hudi-rs compares its `OrderingValue`
variants: integers (int, long, date, time, timestamp), floating point, decimal, string, boolean and
bytes. A delete whose wrapper is of another class than the ordering field carries no comparable
value (`normalize_ordering` makes it null), which behaves as hudi-rs's cross-class comparison: the
later event wins.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_KIND_CLASS = {
    "boolean": "boolean",
    "int": "integer",
    "long": "integer",
    "date": "integer",
    "time_micros": "integer",
    "timestamp_micros": "integer",
    "float": "floating",
    "double": "floating",
    "decimal": "decimal",
    "string": "string",
    "bytes": "bytes",
}


def ordering_class(t: pa.DataType) -> tuple[str, pa.DataType] | None:
    """(class, the type values of that class are compared in) for an ordering field of type `t`;
    None for a type that cannot order records (nested types): then nothing is comparable."""
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        return "integer", pa.int64()
    if pa.types.is_floating(t):
        return "floating", pa.float64()
    if pa.types.is_decimal(t):
        return "decimal", t
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string", pa.string()
    if pa.types.is_boolean(t):
        return "boolean", pa.bool_()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes", pa.binary()
    return None


def _as_integers(arr: pa.Array) -> pa.Array:
    """Integers, dates, times and timestamps as the int64 they are stored as (hudi-rs's Long)."""
    t = arr.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.view(pa.int32()).cast(pa.int64())
    if pa.types.is_temporal(t):
        return arr.view(pa.int64())
    return arr.cast(pa.int64())


def normalize_field_ordering(values: pa.Array | pa.ChunkedArray, field_type: pa.DataType) -> pa.Array:
    """A record ordering column (of the ordering field's type) in its class's comparison type."""
    cls = ordering_class(field_type)
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if cls is None:
        return pa.nulls(len(arr))
    name, target = cls
    if name == "integer":
        return _as_integers(arr)
    return pc.cast(arr, target)


def normalize_delete_ordering(
    deletes: pa.Table, field_type: pa.DataType | None
) -> tuple[pa.Array, np.ndarray]:
    """(ordering in the field's comparison type, natural-order flags) of decoded delete entries.

    Natural order: the null branch, or IntWrapper holding 0 (Java `Integer(0).equals`, so a
    LongWrapper(0) is a real value). Values of another class than the field's become null.
    """
    kinds = deletes.column("ordering_kind").combine_chunks()
    values = deletes.column("ordering").combine_chunks()
    n = deletes.num_rows
    if pa.types.is_integer(values.type):
        zero = pc.equal(values, 0)
    elif pa.types.is_string(values.type):  # a block mixing kinds: values as text
        zero = pc.equal(values, "0")
    else:
        zero = pa.nulls(n, pa.bool_())
    natural = pc.or_(pc.is_null(kinds), pc.and_(pc.equal(kinds, "int"), zero).fill_null(False))
    natural_np = natural.to_numpy(zero_copy_only=False)
    cls = ordering_class(field_type) if field_type is not None else None
    if cls is None or n == 0:
        return pa.nulls(n, cls[1] if cls else pa.null()), natural_np
    name, target = cls
    present = set(pc.unique(kinds).drop_null().to_pylist())
    if not present:
        out = pa.nulls(n, target)
    elif len(present) == 1:  # the values came typed (KIND_TYPES)
        kind = present.pop()
        out = _cast_or_nulls(values, target, name) if _KIND_CLASS[kind] == name else pa.nulls(n, target)
    else:  # a block mixing wrapper kinds: values came as text, convert row by row (rare)
        convert = _TEXT_CONVERTERS[name]
        out = pa.array(
            [
                _convert_text(convert, text) if kind is not None and _KIND_CLASS[kind] == name else None
                for kind, text in zip(kinds.to_pylist(), values.to_pylist(), strict=True)
            ],
            _text_type(name, target),
        ).cast(target)
    return pc.if_else(natural, pa.nulls(n, target), out), natural_np


def _cast_or_nulls(values: pa.Array, target: pa.DataType, name: str) -> pa.Array:
    try:
        return _as_integers(values) if name == "integer" else pc.cast(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(len(values), target)  # out of the field's range: not comparable


def _convert_text(convert: Callable[[str], Any], text: str | None) -> Any:
    if text is None:
        return None
    try:
        return convert(text)
    except (ValueError, InvalidOperation):
        return None


_TEXT_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "integer": int,
    "floating": float,
    "decimal": Decimal,
    "string": str,
    "boolean": lambda s: s == "True",
    "bytes": bytes.fromhex,
}


def _text_type(name: str, target: pa.DataType) -> pa.DataType:
    return pa.decimal128(38, 15) if name == "decimal" else target


# ----------------------------------------------------------------------------- resolution


def _group(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(events sorted by (key code, log order), their codes, their rank within their key)."""
    order = np.lexsort((np.arange(len(codes)), codes))
    sorted_codes = codes[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = sorted_codes[1:] != sorted_codes[:-1]
    start_pos = np.flatnonzero(starts)
    group_of = np.cumsum(starts) - 1
    rank = np.arange(len(order)) - start_pos[group_of]
    return order, sorted_codes, rank


def _valid(arr: pa.Array) -> np.ndarray:
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _cmp(fn: Callable[..., pa.Array], a: pa.Array, b: pa.Array) -> np.ndarray:
    return fn(a, b).fill_null(False).to_numpy(zero_copy_only=False)


def resolve_events(
    codes: np.ndarray,
    n_keys: int,
    is_delete: np.ndarray,
    is_natural: np.ndarray,
    ordering: pa.Array | None,
    event_time: bool,
) -> np.ndarray:
    """The winning event of each key (`codes[i]` is event i's key, 0..n_keys-1; events in log
    order): an int64 array of event indices, one per key.

    `ordering` is the events' ordering values in one comparison type (null: none), with natural-
    order deletes null; it is only used when `event_time`.
    """
    order, sorted_codes, rank = _group(codes)
    state = np.full(n_keys, -1, dtype=np.int64)
    if not event_time or ordering is None:
        # the last event of each key
        last = np.ones(len(order), dtype=bool)
        last[:-1] = sorted_codes[1:] != sorted_codes[:-1]
        state[sorted_codes[last]] = order[last]
        return state
    # one vectorised step per rank: step k folds the k-th event of every key that has one
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(rank))]) if len(rank) else np.zeros(1, dtype=np.int64)
    first = by_rank[bounds[0] : bounds[1]] if len(bounds) > 1 else by_rank[:0]
    state[sorted_codes[first]] = order[first]
    for k in range(1, len(bounds) - 1):
        at = by_rank[bounds[k] : bounds[k + 1]]
        events = order[at]
        keys = sorted_codes[at]
        current = state[keys]
        e_ord = ordering.take(pa.array(events))
        s_ord = ordering.take(pa.array(current))
        both = _valid(e_ord) & _valid(s_ord)
        deleting = is_delete[events]
        data_wins = ~both | _cmp(pc.greater_equal, e_ord, s_ord)
        state_is_natural = is_delete[current] & is_natural[current]
        delete_wins = ~state_is_natural & (is_natural[events] | ~(both & _cmp(pc.greater, s_ord, e_ord)))
        wins = np.where(deleting, delete_wins, data_wins)
        state[keys] = np.where(wins, events, current)
    return state


def merge_base(
    base_codes: np.ndarray,
    base_ordering: pa.Array | None,
    winners: np.ndarray,
    is_delete: np.ndarray,
    is_natural: np.ndarray,
    ordering: pa.Array | None,
    event_time: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(base rows to keep as a bool mask, winning events to emit) after merging the base file's
    records with the log's winners.

    `base_codes[i]` is the key code of base row i (-1 when the log has no event for its key). Only
    the first base row of a key meets the log's record (hudi-rs and Hudi remove the log record
    from their map when a base row takes it); a later duplicate of the key is kept as it is.
    """
    keep = np.ones(len(base_codes), dtype=bool)
    matched_codes, first_rows = np.unique(base_codes, return_index=True)
    has_log = matched_codes >= 0
    matched_codes, first_rows = matched_codes[has_log], first_rows[has_log]
    log_wins = np.ones(len(matched_codes), dtype=bool)
    if event_time and ordering is not None and base_ordering is not None and len(matched_codes):
        w = winners[matched_codes]
        l_ord = ordering.take(pa.array(w))
        b_ord = base_ordering.take(pa.array(first_rows))
        both = _valid(l_ord) & _valid(b_ord)
        natural_delete = is_delete[w] & is_natural[w]
        base_wins = ~natural_delete & both & _cmp(pc.greater, b_ord, l_ord)
        log_wins = ~base_wins
    keep[first_rows[log_wins]] = False
    emit_codes = np.ones(len(winners), dtype=bool)
    emit_codes[matched_codes[~log_wins]] = False
    emitted = winners[emit_codes]
    return keep, emitted[~is_delete[emitted]]


__all__ = [
    "merge_base",
    "normalize_delete_ordering",
    "normalize_field_ordering",
    "ordering_class",
    "resolve_events",
]
