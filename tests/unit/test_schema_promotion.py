"""The pure rules of schema evolution on write: which input types are written as the table's type,
which promote the table's column, and which are refused (engine.schema.evolution)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import SchemaMismatchError
from engine.keygen.keys import KeySpec
from engine.schema.evolution import is_written_as, promote, resolve_write_schema

SPEC = KeySpec(record_key_fields=("id",), partition_fields=("city",))
TABLE = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("val", pa.int32())])

# (input type, table type) -> the table column's type after the write
WRITTEN_AS_TABLE = [
    (pa.int32(), pa.int64()), (pa.int32(), pa.float32()), (pa.int32(), pa.float64()),
    (pa.int64(), pa.float32()), (pa.int64(), pa.float64()), (pa.float32(), pa.float64()),
    (pa.string(), pa.binary()), (pa.binary(), pa.string()),
    (pa.decimal128(8, 2), pa.decimal128(10, 2)), (pa.decimal128(10, 2), pa.decimal128(12, 4)),
]
PROMOTES_TABLE = [
    (pa.int64(), pa.int32()), (pa.float32(), pa.int32()), (pa.float64(), pa.int32()),
    (pa.float32(), pa.int64()), (pa.float64(), pa.int64()), (pa.float64(), pa.float32()),
    (pa.decimal128(12, 2), pa.decimal128(10, 2)), (pa.decimal128(12, 4), pa.decimal128(10, 2)),
]
REFUSED = [
    (pa.string(), pa.int32()), (pa.int32(), pa.string()), (pa.int64(), pa.string()),
    (pa.bool_(), pa.int32()), (pa.int32(), pa.bool_()), (pa.date32(), pa.timestamp("us", "UTC")),
    (pa.decimal128(10, 4), pa.decimal128(10, 2)),  # more scale but fewer integer digits
    (pa.decimal128(10, 2), pa.decimal128(10, 4)),
    (pa.int32(), pa.decimal128(10, 2)), (pa.binary(), pa.int64()),
]


@pytest.mark.parametrize(("got", "table"), WRITTEN_AS_TABLE)
def test_narrower_input_is_written_as_the_table_type(got, table):
    assert is_written_as(got, table)
    assert promote(got, table, "c", [], False) == table


@pytest.mark.parametrize(("got", "table"), PROMOTES_TABLE)
def test_wider_input_promotes_the_table_column(got, table):
    assert not is_written_as(got, table)
    assert promote(got, table, "c", [], False) == got


@pytest.mark.parametrize(("got", "table"), REFUSED)
def test_incompatible_types_are_refused_naming_both(got, table):
    with pytest.raises(SchemaMismatchError) as err:
        promote(got, table, "c", [], False)
    assert str(err.value) == f"column 'c' is {got} in the input but {table} in the table"


def test_same_types_keep_the_table_schema_object():
    incoming = pa.schema([pa.field(f.name, f.type, nullable=False) for f in TABLE])
    assert resolve_write_schema(incoming, TABLE, SPEC, "ts") is TABLE


def test_top_level_promotion_and_new_column():
    incoming = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int32()), ("val", pa.int64()),
                          ("extra", pa.float64())])
    got = resolve_write_schema(incoming, TABLE, SPEC, "ts")
    assert got == pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("val", pa.int64()),
                             ("extra", pa.float64())])


def test_nested_struct_list_and_map_promotions():
    table = pa.struct([("a", pa.int32()), ("b", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.float32()))])
    incoming = pa.struct([("b", pa.list_(pa.int64())), ("a", pa.int64()), ("m", pa.map_(pa.string(), pa.float64())),
                          ("new", pa.string())])
    got = promote(incoming, table, "info", [], False)
    assert got == pa.struct([("a", pa.int64()), ("b", pa.list_(pa.int64())), ("m", pa.map_(pa.string(), pa.float64())),
                             ("new", pa.string())])
    # narrower nested input: the table's nested types stay
    assert promote(pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int64())]), "s", [], True) == pa.struct(
        [("a", pa.int64())])


def test_nested_mismatch_names_the_path():
    table = pa.struct([("a", pa.list_(pa.struct([("x", pa.int32())])))])
    incoming = pa.struct([("a", pa.list_(pa.struct([("x", pa.string())])))])
    with pytest.raises(SchemaMismatchError, match=r"column 'info.a.element.x' is string in the input but int32"):
        promote(incoming, table, "info", [], False)
    with pytest.raises(SchemaMismatchError, match=r"column 'm.key' is int32 in the input but string"):
        promote(pa.map_(pa.int32(), pa.int32()), pa.map_(pa.string(), pa.int32()), "m", [], False)
    with pytest.raises(SchemaMismatchError, match=r"column 's' is int32 in the input but struct<a: int32>"):
        promote(pa.int32(), pa.struct([("a", pa.int32())]), "s", [], False)


def test_missing_columns_refused_unless_filled():
    table = TABLE.append(pa.field("info", pa.struct([("a", pa.int32()), ("b", pa.string())])))
    incoming = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()),
                          ("info", pa.struct([("a", pa.int32())]))])
    with pytest.raises(SchemaMismatchError, match=r"lacks table column\(s\) val, info\.b;"):
        resolve_write_schema(incoming, table, SPEC, "ts")
    assert resolve_write_schema(incoming, table, SPEC, "ts", fill_missing=True) is table


def test_deletes_never_change_the_schema_but_check_types():
    incoming = pa.schema([("id", pa.string()), ("city", pa.string()), ("val", pa.int64())])
    assert resolve_write_schema(incoming, TABLE, SPEC, "ts", deleting=True) is TABLE
    bad = pa.schema([("id", pa.string()), ("city", pa.string()), ("val", pa.string())])
    with pytest.raises(SchemaMismatchError, match="column 'val' is string in the input but int32 in the table"):
        resolve_write_schema(bad, TABLE, SPEC, "ts", deleting=True)
