"""engine.schema.avro: Arrow <-> Avro, checked character for character against Spark + Hudi samples."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import SchemaMismatchError
from engine.schema.avro import (
    META_FIELDS,
    arrow_to_avro,
    arrow_to_create_schema,
    avro_for_table_create,
    avro_to_arrow,
    avro_to_json,
    avro_with_meta_fields,
    min_bytes_for_precision,
    normalize_for_write,
    record_name_and_namespace,
    with_meta_fields,
    without_meta_fields,
)
from tests.support.samples import (
    base_files,
    latest_commit_metadata,
    list_samples,
    require_samples_dir,
    sample_table,
    table_properties,
)

COW_SAMPLES = ("cow_v6_complexkeygen_hivestyle", "cow_v6_nonpartitioned", "cow_v6_simplekeygen_nonhivestyle")
MOR_SAMPLES = (
    "mor_parquet_v6_nonpartitioned",
    "mor_parquet_v6_simplekeygen_nonhivestyle",
    "trips_mor_avro_v6_trips_8i1u",
)
WRITTEN_SAMPLES = COW_SAMPLES + MOR_SAMPLES
ALL_SAMPLES = (*WRITTEN_SAMPLES, "cow_v6_empty")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hudi-samples")


def _table(name: str, unpacked: Path) -> Path:
    return sample_table(name, unpacked)


def _commit_schema(table: Path) -> str:
    return latest_commit_metadata(table)["extraMetadata"]["schema"]


def _shape(t: pa.DataType) -> Any:
    """A strict description of a type: field names and nullability at every level.

    pyarrow's own equality ignores list element names, so it is not used alone. Map
    entries names are left out on purpose: pyarrow names them after the parquet group it
    read (here the column name, 'mapField'), they are not part of Arrow's map type
    equality, and `pa.map_` always names them 'entries'.
    """
    if pa.types.is_struct(t):
        return ("struct", [_field_shape(f) for f in t])
    if pa.types.is_list(t):
        return ("list", _field_shape(t.value_field))
    if pa.types.is_map(t):
        return ("map", _field_shape(t.key_field), _field_shape(t.item_field))
    return str(t)


def _field_shape(f: pa.Field) -> Any:
    return (f.name, f.nullable, _shape(f.type))


def _schema_shape(schema: pa.Schema) -> list[Any]:
    return [_field_shape(f) for f in schema]


def _declared_by_hudi(schema: pa.Schema) -> pa.Schema:
    """Undo the one thing parquet-avro's legacy list layout loses.

    COW base files in the samples were written by parquet-avro (footer
    `writer.model.name=avro`) with its default old list structure: a two-level
    `optional group arrayField (LIST) { repeated group array {...} }`. Two levels leave
    no room for a null element, so pyarrow reads `list<array: T not null>` although the
    table's Avro schema (and Spark's schema) says the element is nullable. Here such a
    list (element field named 'array') gets a nullable element named 'element'.
    Spark's own parquet writer (the MOR base files) writes three levels
    (`repeated group list { optional group element }`), which pyarrow reads as
    `list<element: T>` and this function leaves alone. Nothing else is changed.
    """

    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(fix(f.type)) for f in t])
        if pa.types.is_map(t):
            return pa.map_(t.key_field.with_type(fix(t.key_type)), t.item_field.with_type(fix(t.item_type)))
        if pa.types.is_list(t):
            element = t.value_field
            if element.name == "array":
                return pa.list_(pa.field("element", fix(element.type), nullable=True))
            return pa.list_(element.with_type(fix(element.type)))
        return t

    return pa.schema([f.with_type(fix(f.type)) for f in schema])


# --------------------------------------------------------------------------- samples


def test_the_samples_are_the_known_ones() -> None:
    require_samples_dir()
    assert list_samples() == sorted(ALL_SAMPLES)


@pytest.mark.parametrize("name", WRITTEN_SAMPLES)
def test_commit_schema_from_base_file_arrow_schema(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    table_name = table_properties(table)["hoodie.table.name"]
    expected = _commit_schema(table)
    files = base_files(table)
    assert files
    for path in files:
        schema = without_meta_fields(pq.read_schema(path))
        declared = _declared_by_hudi(schema)
        if name in MOR_SAMPLES:
            # Spark-written base files need no normalisation at all.
            assert _schema_shape(declared) == _schema_shape(schema)
        assert avro_to_json(arrow_to_avro(declared, table_name)) == expected, path.name


@pytest.mark.parametrize("name", COW_SAMPLES)
def test_legacy_two_level_lists_are_the_only_difference(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    raw = without_meta_fields(pq.read_schema(base_files(table)[0]))
    assert raw.field("arrayField").type.value_field.name == "array"
    assert raw.field("arrayField").type.value_field.nullable is False
    avro = arrow_to_avro(raw, table_properties(table)["hoodie.table.name"])
    items = next(f for f in avro["fields"] if f["name"] == "arrayField")["type"][1]["items"]
    assert items["type"] == "record"  # not ["null", record] as in the commit schema


@pytest.mark.parametrize("name", WRITTEN_SAMPLES)
def test_avro_to_arrow_of_commit_schema_is_the_base_file_schema(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    arrow = avro_to_arrow(_commit_schema(table))
    for path in base_files(table):
        file_schema = _declared_by_hudi(without_meta_fields(pq.read_schema(path)))
        assert _schema_shape(arrow) == _schema_shape(file_schema), path.name
        assert arrow.equals(file_schema, check_metadata=False)


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_avro_to_arrow_matches_hudi_rs(name: str, unpacked: Path) -> None:
    hudi = pytest.importorskip("hudi")
    table = _table(name, unpacked)
    if name == "cow_v6_empty":
        avro = table_properties(table)["hoodie.table.create.schema"]
    else:
        avro = _commit_schema(table)
    reference = hudi.HudiTableBuilder.from_base_uri(str(table)).build().get_schema()
    assert _schema_shape(avro_to_arrow(avro)) == _schema_shape(reference)


@pytest.mark.parametrize("name", WRITTEN_SAMPLES)
def test_create_schema_property_reads_like_commit_schema(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    create = table_properties(table)["hoodie.table.create.schema"]
    assert '"null"]' in create and '"default"' not in create  # the [T, "null"] form
    assert _schema_shape(avro_to_arrow(create)) == _schema_shape(avro_to_arrow(_commit_schema(table)))


@pytest.mark.parametrize("name", WRITTEN_SAMPLES)
def test_commit_and_create_schemas_are_rewritten_exactly(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    props = table_properties(table)
    table_name = props["hoodie.table.name"]
    commit = _commit_schema(table)
    create = props["hoodie.table.create.schema"]
    arrow = avro_to_arrow(commit)
    assert avro_to_json(arrow_to_avro(arrow, table_name)) == commit
    assert avro_to_json(arrow_to_create_schema(arrow, table_name)) == create
    assert avro_to_json(avro_for_table_create(json.loads(commit))) == create
    assert avro_to_json(arrow_to_avro(avro_to_arrow(create), table_name)) == commit


def test_empty_table_create_schema_round_trips(unpacked: Path) -> None:
    table = _table("cow_v6_empty", unpacked)
    create = table_properties(table)["hoodie.table.create.schema"]
    arrow = avro_to_arrow(create)
    assert arrow == pa.schema([("id", pa.int32()), ("name", pa.string()), ("isActive", pa.bool_())])
    assert avro_to_json(arrow_to_create_schema(arrow, "v6_empty")) == create
    assert avro_to_json(arrow_to_avro(arrow, "v6_empty")) == (
        '{"type":"record","name":"v6_empty_record","namespace":"hoodie.v6_empty","fields":['
        '{"name":"id","type":["null","int"],"default":null},'
        '{"name":"name","type":["null","string"],"default":null},'
        '{"name":"isActive","type":["null","boolean"],"default":null}]}'
    )


@pytest.mark.parametrize("name", WRITTEN_SAMPLES)
def test_writer_schema_is_the_one_in_parquet_footers(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    writer = avro_to_json(avro_with_meta_fields(json.loads(_commit_schema(table))))
    footers = [pq.read_metadata(p).metadata.get(b"parquet.avro.schema") for p in base_files(table)]
    if name in COW_SAMPLES or name.startswith("trips_"):
        assert footers and all(f == writer.encode() for f in footers)
    else:
        assert footers == [None] * len(footers)  # Spark's writer keeps no Avro schema


def _first_log_block_schema(path: Path) -> str:
    """SCHEMA (key 2) of the first block's header in a MOR log file."""
    data = path.read_bytes()
    assert data[:6] == b"#HUDI#"
    offset = 6 + 8 + 4 + 4  # magic, block length, format version, block type
    (count,) = struct.unpack_from(">i", data, offset)
    offset += 4
    header = {}
    for _ in range(count):
        key, length = struct.unpack_from(">ii", data, offset)
        offset += 8
        header[key] = data[offset : offset + length].decode("utf-8")
        offset += length
    return header[2]


@pytest.mark.parametrize("name", MOR_SAMPLES)
def test_writer_schema_is_the_one_in_log_block_headers(name: str, unpacked: Path) -> None:
    table = _table(name, unpacked)
    writer = avro_to_json(avro_with_meta_fields(json.loads(_commit_schema(table))))
    logs = sorted(p for p in table.rglob(".*.log.*"))
    assert logs
    assert [_first_log_block_schema(p) for p in logs] == [writer] * len(logs)


# --------------------------------------------------------------------------- primitives


def _one_field_avro(avro_type: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "t_record",
        "namespace": "hoodie.t",
        "fields": [{"name": "f", "type": ["null", avro_type], "default": None}],
    }


UTC_US = pa.timestamp("us", tz="UTC")
PRIMITIVES = [
    # arrow type written, Avro type, arrow type read back
    (pa.bool_(), "boolean", pa.bool_()),
    (pa.int8(), "int", pa.int32()),
    (pa.int16(), "int", pa.int32()),
    (pa.int32(), "int", pa.int32()),
    (pa.int64(), "long", pa.int64()),
    (pa.float32(), "float", pa.float32()),
    (pa.float64(), "double", pa.float64()),
    (pa.string(), "string", pa.string()),
    (pa.binary(), "bytes", pa.binary()),
    (pa.date32(), {"type": "int", "logicalType": "date"}, pa.date32()),
    (UTC_US, {"type": "long", "logicalType": "timestamp-micros"}, UTC_US),
    (pa.timestamp("us"), {"type": "long", "logicalType": "timestamp-micros"}, UTC_US),
    (pa.timestamp("us", tz="Europe/Paris"), {"type": "long", "logicalType": "timestamp-micros"}, UTC_US),
    (
        pa.timestamp("ms", tz="UTC"),
        {"type": "long", "logicalType": "timestamp-millis"},
        pa.timestamp("ms", tz="UTC"),
    ),
]


@pytest.mark.parametrize(("arrow_type", "avro_type", "read_back"), PRIMITIVES, ids=str)
def test_primitive_round_trip(arrow_type: pa.DataType, avro_type: Any, read_back: pa.DataType) -> None:
    avro = arrow_to_avro(pa.schema([("f", arrow_type)]), "t")
    assert avro == _one_field_avro(avro_type)
    assert avro_to_arrow(avro) == pa.schema([("f", read_back)])
    assert avro_to_arrow(avro_to_json(avro)) == pa.schema([("f", read_back)])


@pytest.mark.parametrize(
    ("precision", "scale", "size"),
    [(1, 0, 1), (2, 1, 1), (3, 0, 2), (9, 2, 4), (10, 5, 5), (18, 0, 8), (19, 4, 9), (38, 10, 16)],
)
def test_decimal_round_trip(precision: int, scale: int, size: int) -> None:
    assert min_bytes_for_precision(precision) == size
    avro = arrow_to_avro(pa.schema([("f", pa.decimal128(precision, scale))]), "t")
    assert avro == _one_field_avro(
        {
            "type": "fixed",
            "name": "fixed",
            "namespace": "hoodie.t.t_record.f",
            "size": size,
            "logicalType": "decimal",
            "precision": precision,
            "scale": scale,
        }
    )
    assert avro_to_arrow(avro) == pa.schema([("f", pa.decimal128(precision, scale))])


def test_non_nullable_fields_have_no_union_and_no_default() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
            pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))),
        ]
    )
    avro = arrow_to_avro(schema, "t")
    assert avro_to_json(avro) == (
        '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
        '{"name":"id","type":"long"},'
        '{"name":"tags","type":{"type":"array","items":"string"}},'
        '{"name":"m","type":["null",{"type":"map","values":"int"}],"default":null}]}'
    )
    assert avro_to_json(arrow_to_create_schema(schema, "t")) == (
        '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
        '{"name":"id","type":"long"},'
        '{"name":"tags","type":{"type":"array","items":"string"}},'
        '{"name":"m","type":[{"type":"map","values":"int"},"null"]}]}'
    )
    assert _schema_shape(avro_to_arrow(avro)) == _schema_shape(schema)


def test_nested_names_and_namespaces_follow_spark() -> None:
    point = pa.struct([("x", pa.float64()), ("d", pa.decimal128(5, 2))])
    schema = pa.schema(
        [
            ("s", pa.struct([("inner", point)])),
            ("arr", pa.list_(pa.field("element", point))),
            ("decs", pa.list_(pa.field("element", pa.decimal128(4, 1)))),
            ("m", pa.map_(pa.string(), pa.field("value", pa.list_(pa.field("element", point))))),
        ]
    )
    avro = arrow_to_avro(schema, "t")

    def point_record(name: str, namespace: str) -> dict[str, Any]:
        return {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [
                {"name": "x", "type": ["null", "double"], "default": None},
                {
                    "name": "d",
                    "type": [
                        "null",
                        {
                            "type": "fixed",
                            "name": "fixed",
                            "namespace": f"{namespace}.{name}.d",
                            "size": 3,
                            "logicalType": "decimal",
                            "precision": 5,
                            "scale": 2,
                        },
                    ],
                    "default": None,
                },
            ],
        }

    ns = "hoodie.t.t_record"
    assert avro["fields"] == [
        {
            "name": "s",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "s",
                    "namespace": ns,
                    "fields": [
                        {"name": "inner", "type": ["null", point_record("inner", f"{ns}.s")], "default": None}
                    ],
                },
            ],
            "default": None,
        },
        {
            "name": "arr",
            "type": ["null", {"type": "array", "items": ["null", point_record("arr", ns)]}],
            "default": None,
        },
        {
            "name": "decs",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": [
                        "null",
                        {
                            "type": "fixed",
                            "name": "fixed",
                            "namespace": f"{ns}.decs",
                            "size": 2,
                            "logicalType": "decimal",
                            "precision": 4,
                            "scale": 1,
                        },
                    ],
                },
            ],
            "default": None,
        },
        {
            "name": "m",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": ["null", {"type": "array", "items": ["null", point_record("m", ns)]}],
                },
            ],
            "default": None,
        },
    ]
    assert _schema_shape(avro_to_arrow(avro)) == _schema_shape(schema)
    assert avro_to_json(arrow_to_avro(avro_to_arrow(avro_to_json(avro)), "t")) == avro_to_json(avro)


def test_table_names_are_sanitised_like_hudi() -> None:
    assert record_name_and_namespace("trips") == ("trips_record", "hoodie.trips")
    assert record_name_and_namespace("my-table.v2") == ("my__table__v2_record", "hoodie.my__table__v2")
    assert record_name_and_namespace("1st") == ("__st_record", "hoodie.__st")
    assert arrow_to_avro(pa.schema([("a", pa.int32())]), "my-table")["namespace"] == "hoodie.my__table"


def test_avro_to_json_is_compact_ordered_and_keeps_non_ascii() -> None:
    avro = {"type": "record", "name": "r", "doc": "café", "fields": []}
    assert avro_to_json(avro) == '{"type":"record","name":"r","doc":"café","fields":[]}'


# --------------------------------------------------------------------------- Avro -> Arrow


def _record_of(field_type: Any) -> dict[str, Any]:
    return {"type": "record", "name": "r", "namespace": "n", "fields": [{"name": "f", "type": field_type}]}


@pytest.mark.parametrize(
    ("avro_type", "expected"),
    [
        (["null", "int"], pa.field("f", pa.int32())),
        (["int", "null"], pa.field("f", pa.int32())),
        ("int", pa.field("f", pa.int32(), nullable=False)),
        ({"type": "string"}, pa.field("f", pa.string(), nullable=False)),
        ({"type": {"type": "long"}}, pa.field("f", pa.int64(), nullable=False)),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 7, "scale": 3},
            pa.field("f", pa.decimal128(7, 3), False),
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 7},
            pa.field("f", pa.decimal128(7, 0), False),
        ),
        (
            [
                "null",
                {
                    "type": "fixed",
                    "name": "x",
                    "size": 9,
                    "logicalType": "decimal",
                    "precision": 20,
                    "scale": 2,
                },
            ],
            pa.field("f", pa.decimal128(20, 2)),
        ),
        ({"type": "fixed", "name": "x", "size": 4}, pa.field("f", pa.binary(4), False)),
        ({"type": "int", "logicalType": "date"}, pa.field("f", pa.date32(), False)),
        (
            {"type": "long", "logicalType": "timestamp-millis"},
            pa.field("f", pa.timestamp("ms", tz="UTC"), False),
        ),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.field("f", UTC_US, False)),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.field("f", pa.timestamp("us"), False)),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.field("f", pa.timestamp("ms"), False)),
        ({"type": "int", "logicalType": "time-millis"}, pa.field("f", pa.time32("ms"), False)),
        ({"type": "long", "logicalType": "time-micros"}, pa.field("f", pa.time64("us"), False)),
        ({"type": "string", "logicalType": "uuid"}, pa.field("f", pa.string(), False)),
        ({"type": "long", "logicalType": "something-new"}, pa.field("f", pa.int64(), False)),
        ({"type": "enum", "name": "e", "symbols": ["A", "B"]}, pa.field("f", pa.string(), False)),
        (
            {"type": "array", "items": "int"},
            pa.field("f", pa.list_(pa.field("element", pa.int32(), nullable=False)), False),
        ),
        (
            ["null", {"type": "array", "items": ["int", "null"]}],
            pa.field("f", pa.list_(pa.field("element", pa.int32()))),
        ),
        (
            {"type": "map", "values": ["null", "double"]},
            pa.field("f", pa.map_(pa.string(), pa.field("value", pa.float64())), False),
        ),
    ],
    ids=lambda v: avro_to_json(v) if not isinstance(v, pa.Field) else "",
)
def test_avro_to_arrow_types(avro_type: Any, expected: pa.Field) -> None:
    schema = avro_to_arrow(_record_of(avro_type))
    assert _schema_shape(schema) == [_field_shape(expected)]


def test_avro_to_arrow_resolves_named_type_references() -> None:
    point = {
        "type": "record",
        "name": "point",
        "fields": [
            {"name": "x", "type": "double"},
            {"name": "c", "type": {"type": "enum", "name": "c", "symbols": ["A"]}},
        ],
    }
    avro = {
        "type": "record",
        "name": "r",
        "namespace": "n",
        "fields": [
            {"name": "a", "type": point},
            {"name": "b", "type": ["null", "point"]},
            {"name": "c", "type": "n.point"},
            {"name": "d", "type": "c"},
        ],
    }
    point_type = pa.struct([pa.field("x", pa.float64(), False), pa.field("c", pa.string(), False)])
    assert _schema_shape(avro_to_arrow(avro)) == _schema_shape(
        pa.schema(
            [
                pa.field("a", point_type, False),
                pa.field("b", point_type),
                pa.field("c", point_type, False),
                pa.field("d", pa.string(), False),
            ]
        )
    )


@pytest.mark.parametrize(
    ("avro", "message"),
    [
        (_record_of(["null", "int", "string"]), "field 'f': union"),
        (_record_of(["int", "string"]), "field 'f': union"),
        (_record_of(["null"]), "field 'f': union"),
        (_record_of("null"), "field 'f'"),
        (
            _record_of({"type": "record", "name": "s", "fields": [{"name": "g", "type": ["int", "long"]}]}),
            "field 'f.g'",
        ),
        (_record_of({"type": "array", "items": ["int", "string", "null"]}), "field 'f'"),
        (
            _record_of({"type": "fixed", "name": "x", "size": 17, "logicalType": "decimal", "precision": 40}),
            "decimal(40, 0)",
        ),
        (_record_of("nosuchtype"), "unknown Avro type 'nosuchtype'"),
        ({"type": "array", "items": "int"}, "must be an Avro record"),
        ("{not json", "not valid JSON"),
    ],
)
def test_avro_to_arrow_rejects(avro: Any, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        avro_to_arrow(avro)


# --------------------------------------------------------------------------- meta columns


def test_with_and_without_meta_fields() -> None:
    schema = pa.schema(
        [
            pa.field("_hoodie_record_key", pa.int64(), False),
            ("id", pa.int32()),
            ("_hoodie_commit_time", pa.int64()),
        ],
        metadata={"k": "v"},
    )
    with_meta = with_meta_fields(schema)
    assert _schema_shape(with_meta) == [(name, True, "string") for name in META_FIELDS] + [
        ("id", True, "int32")
    ]
    assert with_meta.metadata == {b"k": b"v"}
    without = without_meta_fields(with_meta)
    assert _schema_shape(without) == [("id", True, "int32")]
    assert without.metadata == {b"k": b"v"}
    assert META_FIELDS == (
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    )


def test_avro_with_meta_fields_replaces_existing_ones() -> None:
    avro = arrow_to_avro(pa.schema([("_hoodie_record_key", pa.string()), ("id", pa.int32())]), "t")
    assert avro_to_json(avro_with_meta_fields(avro)) == (
        '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
        + ",".join(f'{{"name":"{n}","type":["null","string"],"doc":"","default":null}}' for n in META_FIELDS)
        + ',{"name":"id","type":["null","int"],"default":null}]}'
    )


# --------------------------------------------------------------------------- normalize_for_write


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (pa.int8(), pa.int32()),
        (pa.int16(), pa.int32()),
        (pa.uint8(), pa.int32()),
        (pa.uint16(), pa.int32()),
        (pa.uint32(), pa.int64()),
        (pa.uint64(), pa.decimal128(20, 0)),
        (pa.float16(), pa.float32()),
        (pa.large_string(), pa.string()),
        (pa.large_binary(), pa.binary()),
        (pa.binary(16), pa.binary()),
        (pa.date64(), pa.date32()),
        (pa.timestamp("ns"), pa.timestamp("us")),
        (pa.timestamp("ns", tz="Asia/Tokyo"), pa.timestamp("us", tz="Asia/Tokyo")),
        (pa.timestamp("s", tz="UTC"), pa.timestamp("us", tz="UTC")),
        (pa.timestamp("us"), pa.timestamp("us")),
        (pa.timestamp("ms"), pa.timestamp("ms")),
        (pa.decimal256(20, 4), pa.decimal128(20, 4)),
        (pa.dictionary(pa.int32(), pa.large_string()), pa.string()),
        (pa.large_list(pa.int8()), pa.list_(pa.field("element", pa.int32()))),
        (
            pa.list_(pa.field("item", pa.uint8(), nullable=False)),
            pa.list_(pa.field("element", pa.int32(), False)),
        ),
        (pa.list_(pa.int32(), 3), pa.list_(pa.field("element", pa.int32()))),
        (
            pa.map_(pa.large_string(), pa.struct([("a", pa.int16())])),
            pa.map_(pa.string(), pa.struct([("a", pa.int32())])),
        ),
        (
            pa.struct([("a", pa.uint32()), ("b", pa.string())]),
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        (pa.bool_(), pa.bool_()),
        (pa.decimal128(10, 5), pa.decimal128(10, 5)),
    ],
    ids=str,
)
def test_normalize_for_write_maps_types(given: pa.DataType, expected: pa.DataType) -> None:
    schema = pa.schema([pa.field("f", given, nullable=False, metadata={"m": "1"})], metadata={"k": "v"})
    normalized = normalize_for_write(schema)
    assert _schema_shape(normalized) == [("f", False, _shape(expected))]
    assert normalized.field("f").metadata == {b"m": b"1"}
    assert normalized.metadata == {b"k": b"v"}
    arrow_to_avro(normalized, "t")  # everything normalised is writable


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (pa.field("d", pa.duration("s")), "field 'd': type duration"),
        (pa.field("u", pa.dense_union([pa.field("a", pa.int32()), pa.field("b", pa.string())])), "field 'u'"),
        (pa.field("u", pa.sparse_union([pa.field("a", pa.int32())])), "field 'u'"),
        (pa.field("n", pa.null()), "field 'n'"),
        (pa.field("t", pa.time64("us")), "field 't'"),
        (pa.field("i", pa.month_day_nano_interval()), "field 'i'"),
        (pa.field("s", pa.struct([("inner", pa.struct([("d", pa.duration("ms"))]))])), "field 's.inner.d'"),
        (pa.field("l", pa.list_(pa.duration("ms"))), "field 'l'"),
        (pa.field("m", pa.map_(pa.int32(), pa.string())), "field 'm': map keys must be strings"),
        (pa.field("e", pa.struct([])), "field 'e': a struct without fields"),
        (pa.field("w", pa.struct([("member0", pa.int32()), ("member1", pa.string())])), "field 'w'"),
        (pa.field("x", pa.decimal256(40, 2)), "field 'x'"),
        (pa.field("my-col", pa.int32()), "field 'my-col'"),
        (pa.field("s", pa.struct([("bad name", pa.int32())])), "field 's.bad name'"),
        (
            pa.field("s", pa.struct([("a", pa.int32()), ("a", pa.int64())])),
            "field 's.a' appears more than once",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, pa.Field) else "",
)
def test_unsupported_types_raise_naming_the_field(field: pa.Field, message: str) -> None:
    schema = pa.schema([field])
    with pytest.raises(SchemaMismatchError, match=message):
        normalize_for_write(schema)
    with pytest.raises(SchemaMismatchError, match=message.split(":")[0]):
        arrow_to_avro(schema, "t")


def test_arrow_to_avro_wants_normalised_input() -> None:
    schema = pa.schema([("ok", pa.int32()), ("big", pa.uint32())])
    with pytest.raises(SchemaMismatchError, match="field 'big': type uint32 .*normalize_for_write"):
        arrow_to_avro(schema, "t")
    with pytest.raises(SchemaMismatchError, match="field 'id' appears more than once"):
        normalize_for_write(pa.schema([("id", pa.int32()), ("id", pa.int64())]))
