"""engine.config.table_config and engine.config.write_config: parsing, writing, validation."""

from __future__ import annotations

import zlib
from pathlib import Path

import javaproperties
import pytest

from engine.config.table_config import (
    COMPLEX_KEYGEN,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    IndexType,
    TableConfig,
    TableType,
    table_checksum,
)
from engine.config.write_config import MB, WriteConfig
from engine.errors import CorruptTableError, InvalidConfigError, UnsupportedTableVersionError
from tests.support.samples import sample_table, table_properties

COW, MOR = TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ
PAYLOAD = ("hoodie.compaction.payload.class", "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload")
MERGER = ("hoodie.compaction.record.merger.strategy", "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5")

# sample -> (name, type, record keys, partition fields, keygen, hive style, precombine, checksum, extra)
SAMPLES = {
    "cow_v6_complexkeygen_hivestyle": (
        "v6_complexkeygen_hivestyle",
        COW,
        ("id", "name"),
        ("byteField", "shortField"),
        COMPLEX_KEYGEN,
        True,
        "longField",
        281415413,
        (),
    ),
    "cow_v6_empty": (
        "v6_empty",
        COW,
        ("id",),
        (),
        NONPARTITIONED_KEYGEN,
        True,
        None,
        1980710965,
        (),
    ),
    "cow_v6_nonpartitioned": (
        "v6_nonpartitioned",
        COW,
        ("id",),
        (),
        NONPARTITIONED_KEYGEN,
        True,
        "longField",
        1363530505,
        (),
    ),
    "cow_v6_simplekeygen_nonhivestyle": (
        "v6_simplekeygen_nonhivestyle",
        COW,
        ("id",),
        ("byteField",),
        SIMPLE_KEYGEN,
        False,
        "longField",
        616688896,
        (),
    ),
    "mor_parquet_v6_nonpartitioned": (
        "v6_nonpartitioned",
        MOR,
        ("id",),
        (),
        NONPARTITIONED_KEYGEN,
        True,
        "longField",
        1363530505,
        (PAYLOAD, MERGER),
    ),
    "mor_parquet_v6_simplekeygen_nonhivestyle": (
        "v6_simplekeygen_nonhivestyle",
        MOR,
        ("id",),
        ("byteField",),
        SIMPLE_KEYGEN,
        False,
        "longField",
        616688896,
        (PAYLOAD, MERGER),
    ),
    "trips_mor_avro_v6_trips_8i1u": (
        "v6_trips_8i1u",
        MOR,
        ("uuid",),
        ("city",),
        SIMPLE_KEYGEN,
        True,
        "ts",
        3843273058,
        (PAYLOAD, MERGER),
    ),
}


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hudi-samples-config")


def _props_text(table: Path) -> str:
    return (table / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8")


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_parse_sample_properties(sample: str, unpacked: Path) -> None:
    table = sample_table(sample, unpacked)
    name, ttype, keys, parts, keygen, hive, precombine, checksum, extra = SAMPLES[sample]
    cfg = TableConfig.from_text(_props_text(table))
    assert cfg.name == name
    assert cfg.database == "default"
    assert cfg.table_type is ttype
    assert cfg.record_key_fields == keys
    assert cfg.partition_fields == parts
    assert cfg.is_partitioned is bool(parts)
    assert cfg.keygen_class == keygen
    assert cfg.uses_complex_keys is (keygen == COMPLEX_KEYGEN)
    assert cfg.hive_style is hive
    assert cfg.precombine_field == precombine
    assert cfg.version == 6
    assert cfg.timeline_layout_version == 1
    assert cfg.url_encode is False
    assert cfg.drop_partition_columns is False
    assert cfg.populate_meta_fields is True
    assert cfg.base_file_format == "PARQUET"
    assert cfg.archivelog_folder == "archived"
    assert cfg.index_type is None
    assert cfg.extra == extra
    assert cfg.create_schema is not None and cfg.create_schema.startswith('{"type":"record","name":"')
    # the checksum we compute equals the one Spark stored
    stored = table_properties(table)["hoodie.table.checksum"]
    assert cfg.checksum == checksum == int(stored) == zlib.crc32(f"default.{name}".encode())
    assert table_checksum("default", name) == checksum


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_config_round_trip(sample: str, unpacked: Path) -> None:
    cfg = TableConfig.from_text(_props_text(sample_table(sample, unpacked)))
    text = cfg.to_text()
    again = TableConfig.from_text(text)
    assert again == cfg
    assert again.to_text() == text
    # every property Spark wrote survives, with the same value
    original = javaproperties.loads(_props_text(sample_table(sample, unpacked)))
    written = javaproperties.loads(text)
    assert {k: v for k, v in written.items() if k in original} == original


def _config() -> TableConfig:
    return TableConfig(
        name="trips",
        record_key_fields=("uuid",),
        table_type=TableType.MERGE_ON_READ,
        partition_fields=("city",),
        precombine_field="ts",
        hive_style=True,
        index_type=IndexType.BLOOM,
        create_schema='{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[]}',
        extra=(("hoodie.some.option", "a=b:c"),),
    )


def test_to_text_exact() -> None:
    text = _config().to_text()
    crc = zlib.crc32(b"default.trips")
    assert text == (
        "hoodie.table.name=trips\n"
        "hoodie.database.name=default\n"
        "hoodie.table.type=MERGE_ON_READ\n"
        "hoodie.table.version=6\n"
        "hoodie.timeline.layout.version=1\n"
        "hoodie.table.recordkey.fields=uuid\n"
        "hoodie.table.partition.fields=city\n"
        "hoodie.table.precombine.field=ts\n"
        "hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\n"
        "hoodie.datasource.write.hive_style_partitioning=true\n"
        "hoodie.datasource.write.partitionpath.urlencode=false\n"
        "hoodie.datasource.write.drop.partition.columns=false\n"
        "hoodie.table.base.file.format=PARQUET\n"
        "hoodie.populate.meta.fields=true\n"
        "hoodie.archivelog.folder=archived\n"
        "hoodie.index.type=BLOOM\n"
        'hoodie.table.create.schema={"type"\\:"record","name"\\:"trips_record",'
        '"namespace"\\:"hoodie.trips","fields"\\:[]}\n'
        "hoodie.some.option=a\\=b\\:c\n"
        f"hoodie.table.checksum={crc}\n"
    )
    assert f"hoodie.table.checksum={crc}\n" in text
    assert crc == table_checksum("default", "trips") == 2200697520


def test_to_text_with_comment_and_round_trip() -> None:
    cfg = _config()
    text = cfg.to_text(comment="Updated at 2024-01-01")
    assert text.startswith("#Updated at 2024-01-01\nhoodie.table.name=trips\n")
    assert TableConfig.from_text(text) == cfg
    props = cfg.to_properties()
    assert list(props)[-1] == "hoodie.table.checksum"
    assert props["hoodie.table.checksum"] == str(table_checksum("default", "trips"))


def test_minimal_config_defaults_and_round_trip() -> None:
    cfg = TableConfig(name="t", record_key_fields=("id",))
    assert cfg.table_type is TableType.COPY_ON_WRITE
    assert cfg.keygen_class == NONPARTITIONED_KEYGEN
    props = cfg.to_properties()
    assert "hoodie.table.partition.fields" not in props
    assert "hoodie.table.precombine.field" not in props
    assert "hoodie.index.type" not in props
    assert "hoodie.table.create.schema" not in props
    assert TableConfig.from_text(cfg.to_text()) == cfg


def test_other_database_checksum() -> None:
    cfg = TableConfig(name="t", record_key_fields=("id",), database="sales")
    assert cfg.checksum == zlib.crc32(b"sales.t")
    assert TableConfig.from_text(cfg.to_text()) == cfg


def test_default_keygen_class() -> None:
    assert TableConfig(name="t", record_key_fields=("a", "b")).keygen_class == COMPLEX_KEYGEN
    assert (
        TableConfig(name="t", record_key_fields=("a",), partition_fields=("p",)).keygen_class == SIMPLE_KEYGEN
    )
    assert (
        TableConfig(name="t", record_key_fields=("a",), partition_fields=("p", "q")).keygen_class
        == COMPLEX_KEYGEN
    )
    assert (
        TableConfig(name="t", record_key_fields=("a", "b"), partition_fields=("p",)).keygen_class
        == COMPLEX_KEYGEN
    )


def test_with_updates() -> None:
    cfg = _config()
    cow = cfg.with_updates(table_type=TableType.COPY_ON_WRITE)
    assert cow.table_type is TableType.COPY_ON_WRITE
    assert cfg.table_type is TableType.MERGE_ON_READ
    assert cow.name == cfg.name


# ---- errors ----------------------------------------------------------------------------------------


def _props(**overrides: str | None) -> dict[str, str]:
    props = {
        "hoodie.table.name": "t",
        "hoodie.database.name": "default",
        "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.checksum": str(zlib.crc32(b"default.t")),
    }
    for k, v in overrides.items():
        key = k.replace("_", ".")
        if v is None:
            props.pop(key, None)
        else:
            props[key] = v
    return props


def test_props_helper_is_valid() -> None:
    cfg = TableConfig.from_properties(_props())
    assert cfg.name == "t"
    assert TableConfig.from_properties(_props(hoodie_table_checksum=None)).name == "t"  # checksum optional


def test_wrong_checksum_is_corrupt() -> None:
    with pytest.raises(CorruptTableError):
        TableConfig.from_properties(_props(hoodie_table_checksum="12345"))
    text = (
        _config()
        .to_text()
        .replace(f"hoodie.table.checksum={table_checksum('default', 'trips')}", "hoodie.table.checksum=1")
    )
    with pytest.raises(CorruptTableError):
        TableConfig.from_text(text)


def test_renamed_table_fails_checksum() -> None:
    text = _config().to_text().replace("hoodie.table.name=trips", "hoodie.table.name=trips2")
    with pytest.raises(CorruptTableError):
        TableConfig.from_text(text)


@pytest.mark.parametrize(("version", "way"), [
    ("7", "it was written by an Apache Hudi newer than this engine knows"),
    ("10", "it was written by an Apache Hudi newer than this engine knows"),
    ("3", "upgrade it with Apache Hudi 0.11 or later first (its first write upgrades the table), then this engine reads it"),
    ("0", "upgrade it with Apache Hudi 0.11 or later first (its first write upgrades the table), then this engine reads it"),
])
def test_another_table_version_is_refused_naming_it(version: str, way: str) -> None:
    with pytest.raises(UnsupportedTableVersionError) as refused:
        TableConfig.from_properties(_props(hoodie_table_version=version))
    assert refused.value.version == int(version)
    assert str(refused.value) == (
        f"table version {version} is not supported: this engine reads versions 4, 5, 6, 8 and 9 and writes "
        f"6, 8 and 9 (4 and 5 after upgrading them to 6); {way}")


@pytest.mark.parametrize("version", ["4", "5"])
def test_versions_4_and_5_are_read(version: str) -> None:
    assert TableConfig.from_properties(_props(hoodie_table_version=version)).version == int(version)


def test_versions_8_and_9_name_their_key_generator_by_type_and_9_its_ordering_fields() -> None:
    v8 = TableConfig.from_properties({**_props(hoodie_table_version="8", hoodie_table_keygenerator_class=None),
                                      "hoodie.table.keygenerator.type": "COMPLEX"})
    assert (v8.version, v8.keygen_class) == (8, "org.apache.hudi.keygen.ComplexKeyGenerator")
    v9 = TableConfig.from_properties({
        **_props(hoodie_table_version="9", hoodie_table_keygenerator_class=None, hoodie_table_precombine_field=None,
                 hoodie_table_partition_fields="city:SIMPLE,day:TIMESTAMP"),
        "hoodie.table.keygenerator.type": "CUSTOM", "hoodie.table.ordering.fields": "ts,seq"})
    assert v9.keygen_class == "org.apache.hudi.keygen.CustomKeyGenerator"
    assert v9.partition_fields == ("city", "day")  # the :TYPE suffixes of a custom key generator
    assert v9.partition_types == ("SIMPLE", "TIMESTAMP")
    assert v9.to_properties()["hoodie.table.partition.fields"] == "city:SIMPLE,day:TIMESTAMP"  # kept
    assert "hoodie.table.partition.fields=city\\:SIMPLE,day\\:TIMESTAMP" in v9.to_text()  # Java's escaping
    v6 = v9.with_updates(version=6)
    assert v6.to_properties()["hoodie.table.partition.fields"] == "city,day"  # Apache Hudi 0.x strips them
    assert v9.precombine_field == "ts"


def test_a_version_that_is_not_a_number_is_corrupt() -> None:
    with pytest.raises(CorruptTableError, match="hoodie.table.version"):
        TableConfig.from_properties(_props(hoodie_table_version="x"))


def test_missing_version_name_or_keys_is_corrupt() -> None:
    with pytest.raises(CorruptTableError):
        TableConfig.from_properties(_props(hoodie_table_version=None))
    with pytest.raises(CorruptTableError):
        TableConfig.from_properties(_props(hoodie_table_name=None))
    # no record key fields: Apache Hudi 0.14's auto-generated keys, unless the table has no meta fields
    auto = TableConfig.from_properties(_props(hoodie_table_recordkey_fields=None))
    assert auto.auto_keys and auto.record_key_fields == ()
    assert "hoodie.table.recordkey.fields" not in auto.to_properties()
    with pytest.raises(CorruptTableError, match="a table without meta fields needs them"):
        TableConfig.from_properties(_props(hoodie_table_recordkey_fields=None, hoodie_populate_meta_fields="false"))


def test_unknown_table_type_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError):
        TableConfig.from_properties(_props(hoodie_table_type="MERGE_ON_WRITE"))
    with pytest.raises(InvalidConfigError):
        TableType.parse("cow")
    assert TableType.parse("merge_on_read") is TableType.MERGE_ON_READ
    assert TableType.parse(TableType.COPY_ON_WRITE) is TableType.COPY_ON_WRITE


def test_unknown_index_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError):
        TableConfig.from_properties(_props(hoodie_index_type="BUCKETS"))
    with pytest.raises(InvalidConfigError):
        IndexType.parse("lsm")
    assert IndexType.parse("global_bloom") is IndexType.GLOBAL_BLOOM
    assert TableConfig.from_properties(_props(hoodie_index_type="hbase")).index_type is IndexType.HBASE


def test_bad_properties_text_is_corrupt() -> None:
    with pytest.raises(CorruptTableError):
        TableConfig.from_text("hoodie.table.name=\\uZZZZ\n")


def test_constructor_validation() -> None:
    with pytest.raises(InvalidConfigError):
        TableConfig(name="", record_key_fields=("id",))
    with pytest.raises(InvalidConfigError):
        TableConfig(name="t", record_key_fields=(), populate_meta_fields=False)
    assert TableConfig(name="t", record_key_fields=()).auto_keys


# ---- WriteConfig -----------------------------------------------------------------------------------


def test_write_config_defaults() -> None:
    cfg = WriteConfig.from_options(None)
    assert cfg == WriteConfig()
    assert cfg.max_file_size == 120 * MB
    assert cfg.small_file_limit == 100 * MB
    assert cfg.record_size_estimate == 1024
    assert cfg.compression == "snappy"
    assert cfg.combine_before_upsert is True
    assert cfg.shuffle_parallelism == 0
    assert cfg.index_type is None


def test_write_config_from_hudi_keys() -> None:
    cfg = WriteConfig.from_options(
        {
            "hoodie.parquet.max.file.size": "1048576",
            "hoodie.parquet.small.file.limit": 0,
            "hoodie.copyonwrite.record.size.estimate": "200",
            "hoodie.parquet.compression.codec": "zstd",
            "hoodie.parquet.block.size": 4096,
            "hoodie.combine.before.upsert": "false",
            "hoodie.combine.before.insert": False,
            "hoodie.combine.before.delete": "TRUE",
            "hoodie.upsert.shuffle.parallelism": "8",
            "hoodie.index.type": "BLOOM",
        }
    )
    assert cfg == WriteConfig(
        max_file_size=1048576,
        small_file_limit=0,
        record_size_estimate=200,
        compression="zstd",
        row_group_size_bytes=4096,
        combine_before_upsert=False,
        combine_before_insert=False,
        combine_before_delete=True,
        shuffle_parallelism=8,
        index_type="BLOOM",
    )


def test_write_config_from_attribute_names() -> None:
    cfg = WriteConfig.from_options(
        {"max_file_size": "2048", "combine_before_insert": "no", "index_type": "SIMPLE"}
    )
    assert (cfg.max_file_size, cfg.combine_before_insert, cfg.index_type) == (2048, False, "SIMPLE")


@pytest.mark.parametrize("key", ["hoodie.parquet.max.file.sizes", "hoodie.unknown", "max_size", ""])
def test_write_config_unknown_key(key: str) -> None:
    with pytest.raises(InvalidConfigError):
        WriteConfig.from_options({key: "1"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.parquet.max.file.size", "big"),
        ("hoodie.parquet.max.file.size", "0"),
        ("hoodie.parquet.max.file.size", "-1"),
        ("hoodie.parquet.small.file.limit", "-1"),
        ("hoodie.copyonwrite.record.size.estimate", "0"),
        ("hoodie.combine.before.upsert", "maybe"),
        ("hoodie.upsert.shuffle.parallelism", None),
    ],
)
def test_write_config_bad_values(key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError):
        WriteConfig.from_options({key: value})


def test_update_partition_path_per_index_defaults_are_apache_hudis() -> None:
    cfg = WriteConfig.from_options(None)
    assert {i: cfg.update_partition_path_for(i) for i in ("GLOBAL_SIMPLE", "GLOBAL_BLOOM", "RECORD", "HBASE")} == {
        "GLOBAL_SIMPLE": True,
        "GLOBAL_BLOOM": True,
        "RECORD": False,
        "HBASE": False,
    }
    specific = WriteConfig.from_options(
        {"hoodie.record.index.update.partition.path": "true", "hoodie.bloom.index.update.partition.path": "false"}
    )
    assert specific.update_partition_path_for("RECORD") is True
    assert specific.update_partition_path_for("GLOBAL_BLOOM") is False
    assert specific.update_partition_path_for("HBASE") is False
    # the generic key overrides every index's own
    generic = WriteConfig.from_options(
        {"hoodie.index.update.partition.path": "false", "hoodie.simple.index.update.partition.path": "true"}
    )
    assert [generic.update_partition_path_for(i) for i in ("GLOBAL_SIMPLE", "GLOBAL_BLOOM", "RECORD", "HBASE")] == [
        False, False, False, False
    ]
    assert WriteConfig.from_options({"hoodie.index.update.partition.path": "true"}).update_partition_path_for("HBASE")


def test_the_checksum_of_a_table_without_a_database_name_sums_an_empty_one() -> None:
    # as Apache Hudi 1.x writes tables created by SQL (hudi-rs fixture table_delete_ord_int: ".h8")
    props = _props(hoodie_database_name=None, hoodie_table_name="h8", hoodie_table_checksum="1219816393")
    assert TableConfig.from_properties(props).name == "h8"
    with pytest.raises(CorruptTableError, match="expected 1219816393 for .h8"):
        TableConfig.from_properties({**props, "hoodie.table.checksum": str(zlib.crc32(b"default.h8"))})


def _created(version: int, precombine: str | None) -> dict[str, str]:
    from engine.table.create import new_table_config

    config = new_table_config(name="trips", record_key="id", partition_fields="city", precombine_field=precombine,
                              table_version=version)
    return javaproperties.loads(config.to_text())


def test_a_new_version_8_table_states_what_apache_hudi_1_0_states() -> None:
    props = _created(8, "ts")
    hudi_1x = {  # the keys a fixture Apache Hudi 1.0 wrote (sample_table/cow/v8_*) states, with our values
        "hoodie.table.version": "8", "hoodie.table.initial.version": "8", "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline", "hoodie.timeline.history.path": "history",
        "hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.precombine.field": "ts",
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.record.merge.strategy.id": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
        "hoodie.compaction.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
        "hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "city",
        "hoodie.archivelog.folder": "archived", "hoodie.table.checksum": str(table_checksum("default", "trips")),
    }
    assert {k: props.get(k) for k in hudi_1x} == hudi_1x
    assert "hoodie.table.keygenerator.class" not in props and "hoodie.table.ordering.fields" not in props
    config = TableConfig.from_text(_created_text(8, "ts"))
    assert (config.version, config.timeline_layout_version, config.keygen_class, config.precombine_field) == (
        8, 2, SIMPLE_KEYGEN, "ts")


def _created_text(version: int, precombine: str | None) -> str:
    from engine.table.create import new_table_config

    return new_table_config(name="trips", record_key="id", partition_fields="city", precombine_field=precombine,
                            table_version=version).to_text()


def test_a_new_version_9_table_states_ordering_fields_and_the_merge_mode_only() -> None:
    props = _created(9, "ts")
    assert props["hoodie.table.version"] == props["hoodie.table.initial.version"] == "9"
    assert props["hoodie.table.ordering.fields"] == "ts" and "hoodie.table.precombine.field" not in props
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert props["hoodie.table.format"] == "native"
    assert "hoodie.compaction.payload.class" not in props and "hoodie.record.merge.strategy.id" not in props
    assert TableConfig.from_text(_created_text(9, "ts")).precombine_field == "ts"
    # without an ordering field the last write wins: commit-time ordering, in both versions
    assert _created(9, None)["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING"
    v8 = _created(8, None)
    assert (v8["hoodie.record.merge.mode"], v8["hoodie.record.merge.strategy.id"], v8["hoodie.compaction.payload.class"]) == (
        "COMMIT_TIME_ORDERING", "ce9acb64-bde0-424c-9b91-f6ebba25356d",
        "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload")


def test_version_6_stays_the_default_and_other_versions_are_refused() -> None:
    from engine.table.create import new_table_config

    props = javaproperties.loads(new_table_config(name="trips", record_key="id").to_text())
    assert props["hoodie.table.version"] == "6" and props["hoodie.timeline.layout.version"] == "1"
    assert props["hoodie.table.keygenerator.class"] == NONPARTITIONED_KEYGEN
    assert "hoodie.record.merge.mode" not in props and "hoodie.timeline.path" not in props
    for bad in (5, 7, 10):
        with pytest.raises(InvalidConfigError, match=f"table version {bad} cannot be created: use 6, 8, 9"):
            new_table_config(name="trips", record_key="id", table_version=bad)


def test_apache_hudis_names_of_its_global_record_index_mean_record() -> None:
    from engine.config.table_config import IndexType

    assert IndexType.parse("RECORD_INDEX") is IndexType.RECORD  # Hudi 1.0 (deprecated in 1.1)
    assert IndexType.parse("global_record_level_index") is IndexType.RECORD  # Hudi 1.1
    with pytest.raises(InvalidConfigError, match="unknown index type 'RECORD_LEVEL_INDEX'"):
        IndexType.parse("RECORD_LEVEL_INDEX")  # 1.1's partitioned one: not this engine's
