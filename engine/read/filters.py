"""Filters given to `Table.read(filters=...)`, in the form hudi-rs and delta-rs take them: a list
of `(column, op, value)` conditions that all hold, `op` one of `=`, `!=`, `<`, `<=`, `>`, `>=`,
`IN`, `NOT IN` (`IN` with a list or tuple of values). Checked against the table's schema
(`InvalidInputError` naming the condition otherwise) and turned into `Predicate`s for pruning
and skipping (`engine.read.skipping`); the rows are then filtered by the same conditions. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from engine.errors import InvalidInputError
from engine.read.prune import Predicate

# op -> (Predicate op, negated)
OPS: dict[str, tuple[str, bool]] = {
    "=": ("eq", False), "==": ("eq", False), "!=": ("eq", True), "<>": ("eq", True),
    "<": ("lt", False), "<=": ("le", False), ">": ("gt", False), ">=": ("ge", False),
    "IN": ("in", False), "NOT IN": ("in", True),
}


def parse(filters: Iterable[Sequence[Any]], schema: pa.Schema) -> list[Predicate]:
    """The conditions as predicates on the table's top-level columns."""
    out: list[Predicate] = []
    for condition in filters:
        if isinstance(condition, (str, bytes)) or not isinstance(condition, Sequence) or len(condition) != 3:
            raise InvalidInputError(f"a filter is a (column, op, value) triple, not {condition!r}")
        column, op, value = condition
        name = " ".join(str(op).split()).upper()
        if name not in OPS:
            raise InvalidInputError(
                f"filter {tuple(condition)!r}: op {op!r} is not one of {', '.join(o for o in OPS if o != '==')}")
        if not isinstance(column, str) or column not in schema.names:
            raise InvalidInputError(f"filter {tuple(condition)!r}: no column {column!r} in the table "
                                    f"(its columns: {', '.join(schema.names)})")
        kind, negated = OPS[name]
        if kind == "in":
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise InvalidInputError(f"filter {tuple(condition)!r}: {name} takes a list of values")
            value = tuple(value)
            if any(v is None for v in value):
                raise InvalidInputError(f"filter {tuple(condition)!r}: {name} with a null value matches nothing")
        elif value is None:
            raise InvalidInputError(f"filter {tuple(condition)!r}: comparing with null matches nothing")
        if any(isinstance(v, (list, dict, tuple, set)) for v in (value if kind == "in" else (value,))):
            raise InvalidInputError(f"filter {tuple(condition)!r}: the value must be a scalar")
        out.append(Predicate(column, kind, value, negated))
    return out


__all__ = ["OPS", "parse"]
