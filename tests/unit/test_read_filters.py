"""`Table.read(filters=...)`'s conditions (`engine.read.filters`): hudi-rs's and delta-rs's
(column, op, value) triples as predicates; every malformed one refused with a message naming it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidInputError
from engine.read.filters import parse
from engine.read.prune import Predicate

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64())])


def test_conditions_become_predicates() -> None:
    assert parse([("id", "=", 1), ("city", "!=", "oslo"), ("ts", "<", 5), ("ts", "<=", 6), ("ts", ">", 7),
                  ("ts", ">=", 8), ("city", "in", ["a", "b"]), ("city", " not  IN ", ("c",))], SCHEMA) == [
        Predicate("id", "eq", 1), Predicate("city", "eq", "oslo", True), Predicate("ts", "lt", 5),
        Predicate("ts", "le", 6), Predicate("ts", "gt", 7), Predicate("ts", "ge", 8),
        Predicate("city", "in", ("a", "b")), Predicate("city", "in", ("c",), True)]
    assert parse([], SCHEMA) == []


@pytest.mark.parametrize(("condition", "message"), [
    (("id", "~", 1), "op '~' is not one of =, !=, <>, <, <=, >, >=, IN, NOT IN"),
    (("nope", "=", 1), "no column 'nope' in the table (its columns: id, city, ts)"),
    (("id", "=", None), "comparing with null matches nothing"),
    (("city", "IN", "abc"), "IN takes a list of values"),
    (("city", "IN", ["a", None]), "IN with a null value matches nothing"),
    (("id", "=", [1]), "the value must be a scalar"),
    (("id", "="), "a filter is a (column, op, value) triple"),
    ("id = 1", "a filter is a (column, op, value) triple"),
])
def test_malformed_conditions_are_refused(condition, message) -> None:
    with pytest.raises(InvalidInputError) as exc:
        parse([condition], SCHEMA)
    assert message in str(exc.value)
