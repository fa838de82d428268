"""engine.keygen.keys: record keys and partition paths, checked against what Spark + Hudi wrote."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.config.table_config import (
    COMPLEX_KEYGEN,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    TableConfig,
)
from engine.errors import InvalidInputError
from engine.keygen.keys import KeySpec, partition_path, record_key, value_to_string
from tests.support.samples import base_files, sample_table

SIMPLE = KeySpec(record_key_fields=("id",), partition_fields=("city",))
COMPLEX = KeySpec(
    record_key_fields=("id", "name"),
    partition_fields=("byteField", "shortField"),
    hive_style=True,
    complex_keys=True,
)


# ---- record keys ---------------------------------------------------------------------------------


def test_simple_key() -> None:
    assert record_key(SIMPLE, {"id": 1, "city": "paris"}) == "1"
    assert record_key(SIMPLE, {"id": "abc-1", "city": "paris"}) == "abc-1"
    assert record_key(SIMPLE, {"id": 0}) == "0"
    assert record_key(SIMPLE, {"id": True}) == "true"
    assert record_key(SIMPLE, {"id": False}) == "false"
    assert record_key(SIMPLE, {"id": -12345678901234}) == "-12345678901234"


@pytest.mark.parametrize("row", [{"id": None}, {"id": ""}, {}], ids=["null", "empty", "missing"])
def test_simple_key_null_or_empty_is_an_error(row: dict) -> None:
    with pytest.raises(InvalidInputError):
        record_key(SIMPLE, row)


def test_complex_key() -> None:
    assert record_key(COMPLEX, {"id": 1, "name": "Alice"}) == "id:1,name:Alice"
    assert record_key(COMPLEX, {"id": 4, "name": "Diana", "byteField": 30}) == "id:4,name:Diana"
    assert record_key(COMPLEX, {"id": None, "name": "Bob"}) == "id:__null__,name:Bob"
    assert record_key(COMPLEX, {"id": 2, "name": None}) == "id:2,name:__null__"
    assert record_key(COMPLEX, {"id": 2, "name": ""}) == "id:2,name:__empty__"
    assert record_key(COMPLEX, {"id": "", "name": "x"}) == "id:__empty__,name:x"
    assert record_key(COMPLEX, {"id": 7}) == "id:7,name:__null__"  # a missing column counts as null


def test_complex_key_single_field_keeps_field_prefix() -> None:
    spec = KeySpec(record_key_fields=("id",), complex_keys=True)
    assert record_key(spec, {"id": 5}) == "id:5"


@pytest.mark.parametrize(
    "row",
    [{"id": None, "name": None}, {"id": "", "name": ""}, {"id": None, "name": ""}, {}],
    ids=["all-null", "all-empty", "null-and-empty", "missing"],
)
def test_complex_key_all_null_or_empty_is_an_error(row: dict) -> None:
    with pytest.raises(InvalidInputError):
        record_key(COMPLEX, row)


def test_value_to_string() -> None:
    assert value_to_string(None) is None
    assert value_to_string(True) == "true"
    assert value_to_string(False) == "false"
    assert value_to_string(10) == "10"
    assert value_to_string("x") == "x"
    assert value_to_string("") == ""


# ---- partition paths -----------------------------------------------------------------------------


def test_partition_path_simple() -> None:
    assert partition_path(SIMPLE, {"id": 1, "city": "paris"}) == "paris"
    assert partition_path(KeySpec(("id",), ("byteField",)), {"byteField": 10}) == "10"


def test_partition_path_hive_style_multi_field() -> None:
    assert (
        partition_path(COMPLEX, {"id": 1, "byteField": 10, "shortField": 300})
        == "byteField=10/shortField=300"
    )
    spec = KeySpec(("id",), ("city",), hive_style=True)
    assert partition_path(spec, {"city": "sao_paulo"}) == "city=sao_paulo"


def test_partition_path_multi_field_non_hive() -> None:
    spec = KeySpec(("id",), ("year", "month"))
    assert partition_path(spec, {"year": 2024, "month": "04"}) == "2024/04"


def test_partition_path_null_and_empty_use_default_partition() -> None:
    assert partition_path(SIMPLE, {"id": 1, "city": None}) == "__HIVE_DEFAULT_PARTITION__"
    assert partition_path(SIMPLE, {"id": 1, "city": ""}) == "__HIVE_DEFAULT_PARTITION__"
    assert partition_path(SIMPLE, {"id": 1}) == "__HIVE_DEFAULT_PARTITION__"
    assert (
        partition_path(COMPLEX, {"byteField": None, "shortField": 300})
        == "byteField=__HIVE_DEFAULT_PARTITION__/shortField=300"
    )


def test_partition_path_non_partitioned_is_empty() -> None:
    spec = KeySpec(("id",))
    assert partition_path(spec, {"id": 1, "city": "paris"}) == ""


def test_keyspec_fields() -> None:
    assert COMPLEX.fields == ("id", "name", "byteField", "shortField")
    assert KeySpec(("id", "city"), ("city", "day")).fields == ("id", "city", "day")
    assert KeySpec(("id",)).fields == ("id",)


# ---- KeySpec.from_config -------------------------------------------------------------------------


def test_keyspec_from_config_simple() -> None:
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("city",))
    assert cfg.keygen_class == SIMPLE_KEYGEN
    assert KeySpec.from_config(cfg) == KeySpec(("id",), ("city",), hive_style=False, complex_keys=False)


def test_keyspec_from_config_complex_hive() -> None:
    cfg = TableConfig(
        name="t", record_key_fields=("id", "name"), partition_fields=("a", "b"), hive_style=True
    )
    assert cfg.keygen_class == COMPLEX_KEYGEN
    assert KeySpec.from_config(cfg) == KeySpec(("id", "name"), ("a", "b"), hive_style=True, complex_keys=True)


def test_keyspec_from_config_non_partitioned() -> None:
    cfg = TableConfig(name="t", record_key_fields=("id",))
    assert cfg.keygen_class == NONPARTITIONED_KEYGEN
    assert KeySpec.from_config(cfg) == KeySpec(("id",), (), hive_style=False, complex_keys=False)


def test_keyspec_from_config_explicit_complex_keygen_single_field() -> None:
    cfg = TableConfig(
        name="t", record_key_fields=("id",), partition_fields=("p",), keygen_class=COMPLEX_KEYGEN
    )
    spec = KeySpec.from_config(cfg)
    assert spec.complex_keys is True
    assert record_key(spec, {"id": 3, "p": "x"}) == "id:3"


# ---- against the Spark-written samples -----------------------------------------------------------


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hudi-samples-keygen")


def _config(table: Path) -> TableConfig:
    return TableConfig.from_text((table / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8"))


# sample -> (expected KeySpec, expected sorted (record key, partition path) over all base files)
SAMPLE_KEYS = {
    "cow_v6_complexkeygen_hivestyle": (
        KeySpec(("id", "name"), ("byteField", "shortField"), hive_style=True, complex_keys=True),
        {
            ("id:1,name:Alice", "byteField=10/shortField=300"),
            ("id:2,name:Bob", "byteField=20/shortField=100"),
            ("id:3,name:Carol", "byteField=10/shortField=300"),
            ("id:4,name:Diana", "byteField=30/shortField=100"),
        },
    ),
    "cow_v6_simplekeygen_nonhivestyle": (
        KeySpec(("id",), ("byteField",), hive_style=False, complex_keys=False),
        {("1", "10"), ("2", "20"), ("3", "10"), ("4", "30")},
    ),
    "cow_v6_nonpartitioned": (
        KeySpec(("id",), (), hive_style=True, complex_keys=False),
        None,
    ),
    "trips_mor_avro_v6_trips_8i1u": (
        KeySpec(("uuid",), ("city",), hive_style=True, complex_keys=False),
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLE_KEYS))
def test_keys_match_what_hudi_wrote(name: str, unpacked: Path) -> None:
    table = sample_table(name, unpacked)
    spec = KeySpec.from_config(_config(table))
    expected_spec, expected_keys = SAMPLE_KEYS[name]
    assert spec == expected_spec
    seen = set()
    checked = 0
    for path in base_files(table):
        for row in pq.read_table(path).to_pylist():
            assert record_key(spec, row) == row["_hoodie_record_key"]
            assert partition_path(spec, row) == row["_hoodie_partition_path"]
            seen.add((row["_hoodie_record_key"], row["_hoodie_partition_path"]))
            checked += 1
    assert checked > 0
    if expected_keys is not None:
        assert seen == expected_keys


# ---- keys of stored rows, for tables without meta fields --------------------------------------
def test_stored_keys_are_computed_from_the_key_fields_as_the_write_renders_them():
    import pyarrow as pa

    from engine.keygen.keys import key_array

    rows = pa.table({"id": pa.array([3, None, 10], pa.int32()), "city": ["paris", "", None]})
    assert key_array(KeySpec(("id",), ("city",)), rows).to_pylist() == ["3", None, "10"]
    complex_keys = KeySpec(("id", "city"), complex_keys=True)
    assert key_array(complex_keys, rows).to_pylist() == ["id:3,city:paris", "id:__null__,city:__empty__", "id:10,city:__null__"]
    assert key_array(complex_keys, rows).to_pylist()[0] == record_key(complex_keys, {"id": 3, "city": "paris"})


def test_stored_keys_of_other_types_render_as_hudi_renders_them():
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    from engine.keygen.keys import key_array

    assert key_array(KeySpec(("price",)), pa.table({"price": [1.5, 1e7]})).to_pylist() == ["1.5", "1.0E7"]
    assert key_array(KeySpec(("amount",)), pa.table({"amount": pa.array([Decimal("0.00")], pa.decimal128(5, 2))})).to_pylist() == ["0.00"]
    stamps = pa.table({"at": pa.array([dt.datetime(2024, 1, 15, 10, 0)], pa.timestamp("us", tz="UTC"))})
    assert key_array(KeySpec(("at",)), stamps).to_pylist() == ["1705312800000000"]  # Avro's timestamp-micros
    assert key_array(KeySpec(("at",), consistent_timestamps=True), stamps).to_pylist() == ["2024-01-15 10:00:00.0"]


# ---- custom key generator, URL encoding, auto-generated keys (issue 32) --------------------------------
def _custom(**extra):
    from engine.config.table_config import CUSTOM_KEYGEN, TableConfig

    base = {"name": "t", "record_key_fields": ("id",), "partition_fields": ("country", "day"),
            "keygen_class": CUSTOM_KEYGEN, "version": 9, "partition_types": ("SIMPLE", "TIMESTAMP"),
            "extra": (("hoodie.keygen.timebased.timestamp.type", "EPOCHMILLISECONDS"),
                      ("hoodie.keygen.timebased.output.dateformat", "yyyy-MM-dd hh a"))}
    return TableConfig(**{**base, **extra})


def test_custom_key_generator_partition_paths_and_keys():
    from engine.keygen.keys import partition_path, record_key

    spec = KeySpec.from_config(_custom())
    assert spec.partition_kinds == ("SIMPLE", "TIMESTAMP") and not spec.complex_keys
    row = {"id": 7, "country": "fr", "day": 1705311000123}
    assert record_key(spec, row) == "7"  # one key field: the value alone, as CustomKeyGenerator's simple part
    assert partition_path(spec, row) == "fr/2024-01-15 09 AM"
    assert partition_path(spec, {**row, "country": None}) == "__HIVE_DEFAULT_PARTITION__/2024-01-15 09 AM"
    hive = KeySpec.from_config(_custom(hive_style=True))
    assert partition_path(hive, row) == "country=fr/day=2024-01-15 09 AM"
    two_keys = KeySpec.from_config(_custom(record_key_fields=("id", "country")))
    assert record_key(two_keys, row) == "id:7,country:fr"


def test_a_version_6_custom_table_takes_its_types_from_the_writer():
    from engine.config.table_config import CUSTOM_KEYGEN, TableConfig
    from engine.errors import InvalidConfigError

    v6 = TableConfig(name="t", record_key_fields=("id",), partition_fields=("country", "day"), keygen_class=CUSTOM_KEYGEN,
                     extra=(("hoodie.keygen.timebased.output.dateformat", "yyyy/MM/dd"),))
    with pytest.raises(InvalidConfigError, match="write with hoodie.datasource.write.partitionpath.field=country:SIMPLE"):
        KeySpec.from_config(v6)
    options = (("hoodie.datasource.write.partitionpath.field", "country:simple,day:timestamp"),
               ("hoodie.keygen.timebased.timestamp.type", "UNIX_TIMESTAMP"))
    assert KeySpec.from_config(v6, options).partition_kinds == ("SIMPLE", "TIMESTAMP")
    with pytest.raises(InvalidConfigError, match="names other partition fields"):
        KeySpec.from_config(v6, (("hoodie.datasource.write.partitionpath.field", "day:simple,country:timestamp"),))
    with pytest.raises(InvalidConfigError, match="use SIMPLE or TIMESTAMP"):
        KeySpec.from_config(v6, (("hoodie.datasource.write.partitionpath.field", "country:simple,day:date"),))


def test_url_encoded_partition_values_escape_as_hudi_does():
    from engine.config.table_config import TableConfig
    from engine.keygen.keys import escape_path_name, partition_path

    # PartitionPathEncodeUtils.escapePathName: control characters, "#%'*/:=?\ DEL {[]^ as %XX (upper case)
    assert escape_path_name('a b:c/d%e=f?g#h"i\'j*k\\l{m[n]o^p\x7fq\x01r}s&t+u,v') == (
        "a b%3Ac%2Fd%25e%3Df%3Fg%23h%22i%27j%2Ak%5Cl%7Bm%5Bn%5Do%5Ep%7Fq%01r}s&t+u,v")
    spec = KeySpec.from_config(TableConfig(name="t", record_key_fields=("id",), partition_fields=("at", "city"),
                                           url_encode=True, hive_style=True))
    assert partition_path(spec, {"at": "2024-01-15 10:00:00", "city": "a/b"}) == "at=2024-01-15 10%3A00%3A00/city=a%2Fb"
    assert partition_path(spec, {"at": None, "city": ""}) == "at=__HIVE_DEFAULT_PARTITION__/city=__HIVE_DEFAULT_PARTITION__"


def test_auto_generated_keys_need_the_meta_key_to_update():
    from engine.config.table_config import TableConfig
    from engine.errors import InvalidConfigError, InvalidInputError
    from engine.keygen.keys import check_auto_key_write

    spec = KeySpec.from_config(TableConfig(name="t", record_key_fields=(), partition_fields=("city",)))
    assert spec.auto and spec.fields == ("city",)
    check_auto_key_write("t", "INSERT", ["city"], "BLOOM", False)
    check_auto_key_write("t", "UPSERT", ["_hoodie_record_key", "city"], "BLOOM", False)
    with pytest.raises(InvalidInputError, match="names the records it changes by their _hoodie_record_key"):
        check_auto_key_write("t", "DELETE", ["city"], "BLOOM", False)
    with pytest.raises(InvalidConfigError, match="index RECORD is not kept"):
        check_auto_key_write("t", "INSERT", ["city"], "RECORD", True)


def test_a_table_without_meta_fields_writes_with_simple_indexes_only():
    from engine.config.table_config import IndexType, TableConfig
    from engine.errors import InvalidConfigError
    from engine.index import write_index_type as write_index
    from engine.table.create import new_table_config

    virtual = TableConfig(name="t", record_key_fields=("id",), populate_meta_fields=False)
    assert KeySpec.from_config(virtual).virtual is True
    assert write_index(virtual, None) is IndexType.SIMPLE  # no bloom filter in its files
    assert write_index(virtual, "GLOBAL_SIMPLE") is IndexType.GLOBAL_SIMPLE
    with pytest.raises(InvalidConfigError, match="index BLOOM cannot serve a table without meta fields"):
        write_index(virtual, "BLOOM")
    assert write_index(TableConfig(name="t", record_key_fields=("id",)), None) is IndexType.BLOOM
    cfg = new_table_config(name="t", record_key="id", index="SIMPLE", populate_meta_fields=False)
    assert cfg.to_properties()["hoodie.populate.meta.fields"] == "false"
    with pytest.raises(InvalidConfigError, match="needs index SIMPLE or GLOBAL_SIMPLE"):
        new_table_config(name="t", record_key="id", populate_meta_fields=False)
    with pytest.raises(InvalidConfigError, match="COPY_ON_WRITE only"):
        new_table_config(name="t", record_key="id", index="SIMPLE", table_type="MERGE_ON_READ", populate_meta_fields=False)


def test_a_task_names_new_records_of_auto_generated_keys():
    import pyarrow as pa

    from engine.columns import KEY_COL
    from engine.keygen.keys import AUTO_KEY
    from engine.write.bulk_files import with_auto_keys

    rows = pa.table({KEY_COL: [AUTO_KEY, AUTO_KEY, "20240101000000000_3_9"], "v": [1, 2, 3]})
    named = with_auto_keys(rows, "20260101000000000", 4)
    # HoodieRecord.generateSequenceId(instant, partition, row): new records only
    assert named.column(KEY_COL).to_pylist() == ["20260101000000000_4_0", "20260101000000000_4_1", "20240101000000000_3_9"]
    keyed = pa.table({KEY_COL: ["a"], "v": [1]})
    assert with_auto_keys(keyed, "20260101000000000", 4) is keyed


def test_services_and_writes_resolve_the_same_index(tmp_path):
    """One index resolution: the table services (rollback reverting an index, restore) use the
    index a write would, also for a table without meta fields (SIMPLE, not the BLOOM default)."""
    from engine.config.table_config import TableConfig
    from engine.config.write_config import WriteConfig
    from engine.index import resolve_index
    from engine.services.maintenance import Maintenance
    from engine.storage import storage_for
    from engine.table.meta_client import MetaClient

    for config, expected in (
        (TableConfig(name="t", record_key_fields=("id",), populate_meta_fields=False), "SIMPLE"),
        (TableConfig(name="u", record_key_fields=("id",)), "BLOOM"),
    ):
        meta = MetaClient.create(storage_for(str(tmp_path / config.name)), config)
        assert resolve_index(config, WriteConfig.from_options({})).name == expected
        assert Maintenance(meta)._index().name == expected
        assert Maintenance(meta, {"hoodie.index.type": "GLOBAL_SIMPLE"})._index().name == "GLOBAL_SIMPLE"



def test_record_keys_are_null_where_the_key_is_invalid():
    """`record_keys` (the local write's keys): key_array's text, null for a null or empty simple
    key and for a complex key whose every field is null or empty (what record_key_expr gives)."""
    import pyarrow as pa

    from engine.keygen.keys import AUTO_KEY, record_keys

    rows = pa.table({"id": [3, None, 10, None], "city": ["paris", "", None, "rome"]})
    assert record_keys(KeySpec(("id",), ("city",)), rows).to_pylist() == ["3", None, "10", None]
    assert record_keys(KeySpec(("city",)), rows).to_pylist() == ["paris", None, None, "rome"]
    complex_keys = KeySpec(("id", "city"), complex_keys=True)
    assert record_keys(complex_keys, rows).to_pylist() == [
        "id:3,city:paris", None, "id:10,city:__null__", "id:__null__,city:rome"]
    auto = KeySpec((), ("city",), auto=True)
    assert record_keys(auto, rows).to_pylist() == [AUTO_KEY] * 4
    assert record_keys(auto, pa.table({"_hoodie_record_key": ["k1", ""]})).to_pylist() == ["k1", None]
