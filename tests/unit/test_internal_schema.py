"""Apache Hudi's internal schema (ids, JSON, history) and the column changes of `Table.alter`."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from engine.errors import SchemaChangeError, SchemaMismatchError
from engine.schema import internal as ins
from engine.schema.changes import ChangeType, Drop, Move, Rename, apply_changes, parse_type

NESTED = pa.schema([
    ("a", pa.int32()), ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("l", pa.list_(pa.int64())),
    ("m", pa.map_(pa.string(), pa.float64())), ("b", pa.decimal128(10, 2)), ("t", pa.timestamp("us", tz="UTC")),
    ("d", pa.date32()), ("k", pa.binary()), ("n", pa.int32(), False),
])


def test_ids_are_given_as_apache_hudi_gives_them():
    """A record's fields first (meta columns 0-4), then nested types depth first; a list element
    one id, a map key and value two (`AvroInternalSchemaConverter.visitAvroSchemaToBuildType`)."""
    s = ins.from_arrow(NESTED, 0)
    assert [(f["id"], f["name"]) for f in s.fields] == [
        (0, "_hoodie_commit_time"), (1, "_hoodie_commit_seqno"), (2, "_hoodie_record_key"),
        (3, "_hoodie_partition_path"), (4, "_hoodie_file_name"), (5, "a"), (6, "s"), (7, "l"), (8, "m"),
        (9, "b"), (10, "t"), (11, "d"), (12, "k"), (13, "n")]
    by = {f["name"]: f for f in s.fields}
    assert by["s"]["type"] == {"type": "record", "fields": [
        {"id": 14, "name": "x", "optional": True, "type": "int"},
        {"id": 15, "name": "y", "optional": True, "type": "string"}]}
    assert by["l"]["type"] == {"type": "array", "element-id": 16, "element": "long", "element_optional": True}
    assert by["m"]["type"] == {"type": "map", "key-id": 17, "key": "string", "value-id": 18, "value": "double",
                               "value_optional": True}
    assert [by[n]["type"] for n in ("b", "t", "d", "k")] == ["decimal(10, 2)", "timestamp", "date", "binary"]
    assert by["n"]["optional"] is False and by["_hoodie_commit_time"]["doc"] == ""
    assert s.max_column_id == 18


def test_json_is_serde_helpers_form_and_round_trips():
    s = ins.from_arrow(pa.schema([("a", pa.int32())]), 20261126190000123)
    text = s.to_json()
    assert text.startswith('{"max_column_id":5,"version-id":20261126190000123,"type":"record","fields":[{"id":0,')
    assert '{"id":5,"name":"a","optional":true,"type":"int"}' in text
    assert ins.InternalSchema.from_json(text) == s
    newer = ins.InternalSchema(20261126200000000, 6, s.fields)
    history = ins.history_json([s, newer])
    assert json.loads(history)["schemas"][0]["version-id"] == 20261126200000000  # newest first
    assert ins.parse_history(history) == [s, newer]
    with pytest.raises(ValueError, match="schemas"):
        ins.parse_history('{"x": 1}')


def test_evolve_keeps_ids_by_name_and_old_name_and_gives_new_ones_above_the_max():
    v0 = ins.from_arrow(pa.schema([("id", pa.string()), ("fare", pa.float64()), ("tip", pa.float64())]), 0)
    same = ins.evolve(v0, pa.schema([("id", pa.string()), ("fare", pa.float64()), ("tip", pa.float64())]), 7)
    assert same is v0
    v1 = ins.evolve(v0, pa.schema([("id", pa.string()), ("amount", pa.float64())]), 7, renamed={"amount": "fare"})
    assert v1.version_id == 7 and v1.ids()["amount"] == v0.ids()["fare"] == 6 and "tip" not in v1.ids()
    v2 = ins.evolve(v1, pa.schema([("id", pa.string()), ("amount", pa.float64()), ("tip", pa.float64())]), 9,
                    history=[v0])
    assert v2.ids()["tip"] == 8 and v2.max_column_id == 8  # a new id: the old tip (7) stays gone
    with pytest.raises(SchemaMismatchError, match=r"column name 'tip' was another column \(double\) until version 0"):
        ins.evolve(v1, pa.schema([("id", pa.string()), ("amount", pa.float64()), ("tip", pa.string())]), 9,
                   history=[v0])
    widened = ins.evolve(v0, pa.schema([("id", pa.string()), ("fare", pa.float64()), ("tip", pa.decimal128(12, 2))]), 5)
    assert widened.ids() == v0.ids() and widened.field("tip")["type"] == "decimal(12, 2)"


def test_search_and_file_columns_map_a_files_instant_to_its_names():
    v0 = ins.from_arrow(pa.schema([("id", pa.string()), ("fare", pa.float64()), ("tip", pa.float64())]), 0)
    v1 = ins.evolve(v0, pa.schema([("id", pa.string()), ("amount", pa.float64())]), 200, renamed={"amount": "fare"})
    v2 = ins.evolve(v1, pa.schema([("id", pa.string()), ("amount", pa.float64()), ("tip", pa.float64())]), 300)
    assert ins.search([v0, v1, v2], "199") is v0 and ins.search([v0, v1, v2], "250") is v1
    assert ins.search([v1], "100") is None
    read = ins.attach_versions(pa.schema([("id", pa.string()), ("amount", pa.float64()), ("tip", pa.float64())]),
                               v2, [v0, v1, v2])
    assert ins.file_columns(read, "150") == {"id": "id", "amount": "fare", "tip": None}
    assert ins.file_columns(read, "250") == {"id": "id", "amount": "amount", "tip": None}
    assert ins.file_columns(read, "300") == {"id": "id", "amount": "amount", "tip": "tip"}
    assert ins.file_columns(read, None) is None
    assert ins.file_columns(pa.schema([("id", pa.string())]), "150") is None  # no internal schema
    assert ins.without_versions(read).metadata is None


def test_changes_apply_in_order_and_name_what_was_renamed():
    s = pa.schema([("id", pa.string()), ("fare", pa.float64()), ("tip", pa.float64()), ("q", pa.int32())])
    out, renamed = apply_changes(s, [Rename("fare", "amount"), Rename("amount", "total"), Drop("tip"),
                                     ChangeType("q", pa.int64()), Move("q", first=True)], {})
    assert out == pa.schema([("q", pa.int64()), ("id", pa.string()), ("total", pa.float64())])
    assert renamed == {"total": "fare"}
    out, _ = apply_changes(s, [Move("id", before="q"), Move("tip", after="q")], {})
    assert out.names == ["fare", "id", "q", "tip"]
    assert parse_type("decimal(12, 2)") == pa.decimal128(12, 2) and parse_type("LONG") == pa.int64()
    with pytest.raises(SchemaChangeError, match="unknown column type 'uuid'"):
        parse_type("uuid")
    with pytest.raises(SchemaChangeError, match="drop id: it is the table's last column"):
        apply_changes(pa.schema([("id", pa.string())]), [Drop("id")], {})
    with pytest.raises(SchemaChangeError, match="drop q: 'q' is the table's partition field"):
        apply_changes(s, [Drop("q")], {"q": "partition field"})


def test_a_write_bringing_a_dropped_name_back_reads_old_files_without_it():
    """`for_write` attaches the version the write makes: the re-added `tip` has a new id, so a
    copy-on-write merge does not carry the old files' dropped values into the files it rewrites."""
    v0 = ins.from_arrow(pa.schema([("id", pa.string()), ("tip", pa.float64())]), 0)
    v1 = ins.evolve(v0, pa.schema([("id", pa.string())]), 100)
    write = ins.for_write(pa.schema([("id", pa.string()), ("tip", pa.float64())]), [v0, v1], 200)
    assert ins.file_columns(write, "50") == {"id": "id", "tip": None}
    assert ins.file_columns(write, "150") == {"id": "id", "tip": None}


def test_files_older_than_the_first_version_read_under_its_names():
    """An internal schema started by a write (first version = that commit, not 0): older files
    hold the first version's names, so a later rename still finds their values."""
    v1 = ins.from_arrow(pa.schema([("id", pa.string()), ("fare", pa.float64())]), 100)
    v2 = ins.evolve(v1, pa.schema([("id", pa.string()), ("amount", pa.float64())]), 200, renamed={"amount": "fare"})
    read = ins.attach_versions(pa.schema([("id", pa.string()), ("amount", pa.float64())]), v2, [v1, v2])
    assert ins.file_columns(read, "50") == {"id": "id", "amount": "fare"}


def test_a_nested_column_may_come_back_with_the_same_type():
    s = pa.struct([("x", pa.int32()), ("l", pa.list_(pa.string()))])
    v0 = ins.from_arrow(pa.schema([("id", pa.string()), ("s", s)]), 0)
    v1 = ins.evolve(v0, pa.schema([("id", pa.string())]), 100)
    v2 = ins.evolve(v1, pa.schema([("id", pa.string()), ("s", s)]), 200, history=[v0])
    assert v2.ids()["s"] == v0.max_column_id + 1  # a new column: the next id, then its nested ids
    assert v2.field("s")["type"]["fields"][0]["id"] == v0.max_column_id + 2
    with pytest.raises(SchemaMismatchError, match="column name 's' was another column"):
        ins.evolve(v1, pa.schema([("id", pa.string()), ("s", pa.struct([("x", pa.string())]))]), 200, history=[v0])


def test_names_apache_hudi_reserves_are_refused():
    s = pa.schema([("id", pa.string()), ("fare", pa.float64()), ("_hoodie_is_deleted", pa.bool_())])
    for change, message in [
        (Rename("fare", "__hoodie_op"), "'__hoodie_op' is a name Apache Hudi reserves"),
        (Rename("fare", "_hoodie_is_deleted"), "a column named '_hoodie_is_deleted' exists"),
        (Rename("fare", "_HOODIE_RECORD_KEY"), "a column named '_HOODIE_RECORD_KEY' exists"),
        (Drop("_hoodie_is_deleted"), "_hoodie_is_deleted marks deleted records"),
        (Rename("_hoodie_is_deleted", "gone"), "_hoodie_is_deleted marks deleted records"),
    ]:
        with pytest.raises(SchemaChangeError, match=message):
            apply_changes(s, [change], {})
    with pytest.raises(SchemaChangeError, match="'_Hoodie_Is_Deleted' is a name Apache Hudi reserves"):
        apply_changes(pa.schema([("id", pa.string()), ("fare", pa.float64())]), [Rename("fare", "_Hoodie_Is_Deleted")], {})
