"""Which file slices a filtered read can skip, and which rows its Parquet reads can skip (pure).

A query's conjunctive predicates (`Predicate`, from Spark's pushed filters) are used twice:
- partition pruning: a slice whose partition path proves a predicate false is not read at all.
  Only where the path holds the column's value as text (simple and complex key generators, no
  URL encoding): hive style `city=paris`, else the values in the order of the partition fields;
  the null/empty placeholder and values that do not parse as the column's type prune nothing;
- Parquet skipping: on a base file read as it is (no log files to merge), the predicates become a
  pyarrow filter, so row groups whose statistics rule them out are not read. Only for string,
  integer, boolean and date columns, whose comparisons Spark and Arrow evaluate alike (floating
  point is left out: Spark orders NaN above every number, Arrow compares it false).
Spark evaluates every filter again on the rows returned, so skipping never has to be exact, only
never wrong.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import DEFAULT_PARTITION_PATH

OPS = ("eq", "eq_null_safe", "gt", "ge", "lt", "le", "in", "is_null", "is_not_null",
       "starts_with", "ends_with", "contains")
_LEGACY_DEFAULT_PARTITION = "default"


@dataclass(frozen=True)
class Predicate:
    """`column <op> value`, negated when `negated`; `value` is a tuple for `in`, None for the
    null tests."""

    column: str
    op: str
    value: Any = None
    negated: bool = False


def partition_values(partition: str, fields: Sequence[str], hive_style: bool) -> dict[str, str] | None:
    """The partition fields' values as text in a partition path (None when the path does not split
    into exactly those fields)."""
    if not fields or partition == "":
        return None
    if hive_style:
        out = {}
        for segment in partition.split("/"):
            name, sep, value = segment.partition("=")
            if not sep:
                return None
            out[name] = value
        return out if set(out) == set(fields) else None
    if len(fields) == 1:
        return {fields[0]: partition}
    segments = partition.split("/")
    return dict(zip(fields, segments, strict=True)) if len(segments) == len(fields) else None


def _typed(text: str, t: pa.DataType) -> Any:
    """`text` as a value of type `t` (a partition path's value), or raise ValueError."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text
    if pa.types.is_integer(t):
        if text.strip() != text or not text.lstrip("-").isdigit():
            raise ValueError(text)
        return int(text)
    if pa.types.is_boolean(t):
        if text not in ("true", "false"):
            raise ValueError(text)
        return text == "true"
    if pa.types.is_date32(t):
        return dt.date.fromisoformat(text)
    raise ValueError(text)


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("eq", "eq_null_safe"):
        return bool(left == right)
    if op == "gt":
        return bool(left > right)
    if op == "ge":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    if op == "le":
        return bool(left <= right)
    if op == "in":
        return left in right
    if op == "starts_with":
        return str(left).startswith(right)
    if op == "ends_with":
        return str(left).endswith(right)
    if op == "contains":
        return right in str(left)
    raise ValueError(op)


def _holds(pred: Predicate, value: Any) -> bool | None:
    """Whether `pred` holds for a non-null partition value (None: cannot tell)."""
    if pred.op == "is_null":
        result = False
    elif pred.op == "is_not_null":
        result = True
    else:
        values = pred.value if pred.op == "in" else (pred.value,)
        if any(v is None for v in values) or any(type(v) is not type(value) for v in values):
            return None  # a literal of another type than the column's value: Spark cast it; do not guess
        try:
            result = _compare(pred.op, value, pred.value)
        except (TypeError, ValueError):
            return None
    return (not result) if pred.negated else result


def slice_may_match(
    partition: str,
    predicates: Sequence[Predicate],
    fields: Sequence[str],
    hive_style: bool,
    types: Mapping[str, pa.DataType],
) -> bool:
    """False only when `partition`'s path proves one of `predicates` false for every record in it."""
    relevant = [p for p in predicates if p.column in fields]
    if not relevant:
        return True
    values = partition_values(partition, fields, hive_style)
    if values is None:
        return True
    for pred in relevant:
        text = values.get(pred.column)
        if text is None or text in (DEFAULT_PARTITION_PATH, _LEGACY_DEFAULT_PARTITION, ""):
            continue  # a null placeholder (or a value that might be "default" itself): keep
        t = types.get(pred.column)
        if t is None:
            continue
        try:
            value = _typed(text, t)
        except ValueError:
            continue
        if _holds(pred, value) is False:
            return False
    return True


def _pushable_type(t: pa.DataType) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
            or pa.types.is_boolean(t) or pa.types.is_date32(t))


def _literal_fits(t: pa.DataType, value: Any) -> bool:
    if value is None:
        return False
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(value, str)
    if pa.types.is_boolean(t):
        return isinstance(value, bool)
    if pa.types.is_integer(t):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_date32(t):
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return False


def arrow_filter(predicates: Sequence[Predicate], schema: pa.Schema) -> pc.Expression | None:
    """The conjunction of the predicates a Parquet read can evaluate exactly as Spark does, as a
    pyarrow expression (None when there is none)."""
    parts = []
    for pred in predicates:
        if pred.column not in schema.names or not _pushable_type(schema.field(pred.column).type):
            continue
        t = schema.field(pred.column).type
        field = pc.field(pred.column)
        expr: pc.Expression
        if pred.op == "is_null":
            expr = field.is_null()
        elif pred.op == "is_not_null":
            expr = field.is_valid()
        elif pred.op == "in":
            values = [v for v in pred.value if v is not None]
            if not values or not all(_literal_fits(t, v) for v in values) or len(values) != len(pred.value):
                continue
            expr = field.isin(pa.array(values, type=t))
        elif pred.op in ("starts_with", "ends_with", "contains"):
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)) or not isinstance(pred.value, str):
                continue
            fn = {"starts_with": "starts_with", "ends_with": "ends_with", "contains": "match_substring"}[pred.op]
            expr = pc.Expression._call(fn, [field], pc.MatchSubstringOptions(pred.value))
        else:
            if not _literal_fits(t, pred.value):
                continue
            lit = pc.scalar(pa.scalar(pred.value, type=t))
            expr = {
                "eq": field == lit, "eq_null_safe": field == lit, "gt": field > lit, "ge": field >= lit,
                "lt": field < lit, "le": field <= lit,
            }[pred.op]
        if pred.negated:
            if pred.op in ("is_null", "is_not_null", "eq_null_safe"):
                continue  # NOT of a null-aware test keeps nulls Spark would keep: leave it to Spark
            expr = ~expr
        parts.append(expr)
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


_EPOCH_DAY = dt.date(1970, 1, 1)


def _stat_value(t: pa.DataType, kind: str, value: Any) -> Any:
    """A column statistic (as Hudi's column_stats hold it) as a value comparable with a literal of
    the column's type `t` (None: not comparable, so nothing is skipped)."""
    if value is None:
        return None
    if (pa.types.is_string(t) or pa.types.is_large_string(t)) and kind == "STRING" and isinstance(value, str):
        return value
    if pa.types.is_integer(t) and kind in ("INT", "LONG") and isinstance(value, int) and not isinstance(value, bool):
        return value
    if pa.types.is_boolean(t) and kind == "BOOLEAN" and isinstance(value, bool):
        return value
    if pa.types.is_date32(t) and kind == "DATE" and isinstance(value, int):
        return _EPOCH_DAY + dt.timedelta(days=value)
    if pa.types.is_decimal(t) and kind == "DECIMAL" and isinstance(value, bytes | int):
        unscaled = int.from_bytes(value, "big", signed=True) if isinstance(value, bytes) else value
        return decimal.Decimal(unscaled).scaleb(-t.scale)
    return None


def _decimal_fits(t: pa.DataType, value: Any) -> bool:
    """A decimal literal (Spark pushes `Decimal`s; a NaN or infinity compares with nothing)."""
    return isinstance(value, decimal.Decimal) and value.is_finite()


def range_may_match(pred: Predicate, stats: Mapping[str, Any] | None, t: pa.DataType | None,
                    kind: str | None = None) -> bool:
    """False only when a file's statistics for `pred.column` prove `pred` false for every record
    of the file: `stats` holds `valueCount`, `nullCount` and the unwrapped `min` and `max`, `kind`
    the statistic's value type (Hudi's `ValueType` name). No statistics, a type this cannot
    compare exactly as Spark does (floating point, timestamps), a negated comparison or
    a substring test: True."""
    if stats is None or t is None:
        return True
    values, nulls = stats.get("valueCount"), stats.get("nullCount")
    if not isinstance(values, int) or not isinstance(nulls, int) or values < 0 or nulls < 0:
        return True
    op = pred.op
    if op in ("is_null", "is_not_null") and pred.negated:
        op = "is_not_null" if op == "is_null" else "is_null"
    elif pred.negated:
        return True
    if op == "is_null":
        return nulls > 0
    if op == "is_not_null":
        return nulls < values
    if nulls >= values:
        return False  # no value but nulls (or no record at all): no comparison holds
    if op not in ("eq", "eq_null_safe", "gt", "ge", "lt", "le", "in", "starts_with"):
        return True
    low, high = _stat_value(t, kind or "", stats.get("min")), _stat_value(t, kind or "", stats.get("max"))
    if low is None or high is None:
        return True
    literals = pred.value if op == "in" else (pred.value,)
    fits = _decimal_fits if pa.types.is_decimal(t) else _literal_fits
    if not literals or not all(fits(t, v) for v in literals):
        return True
    try:
        if op == "starts_with":
            prefix = pred.value
            return not (high < prefix or low[: len(prefix)] > prefix)
        if op in ("eq", "eq_null_safe", "in"):
            return any(low <= v <= high for v in literals)
        v = pred.value
        return {"gt": high > v, "ge": high >= v, "lt": low < v, "le": low <= v}[op]
    except TypeError:
        return True


def group_slices(sizes: Sequence[int], target_bytes: int) -> list[list[int]]:
    """Indexes of slices packed into read partitions in order: one slice per partition, or small
    slices together up to `target_bytes` (a slice bigger than that is a partition of its own)."""
    groups: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, size in enumerate(sizes):
        if current and filled + size > target_bytes:
            groups.append(current)
            current, filled = [], 0
        current.append(i)
        filled += size
    if current:
        groups.append(current)
    return groups


def target_partition_bytes(total_bytes: int, min_partitions: int, max_bytes: int, min_bytes: int) -> int:
    """Bytes per read partition: the total spread over at least `min_partitions`, within
    [min_bytes, max_bytes] (as Spark's file sources size their splits)."""
    return max(min_bytes, min(max_bytes, total_bytes // max(1, min_partitions) + 1))
