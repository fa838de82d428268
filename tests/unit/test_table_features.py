"""engine.config.table_features: the properties a write refuses, each named with its value."""

from __future__ import annotations

import pytest

from engine.config.table_features import unknown_properties, write_problems

# what Apache Hudi 1.1 wrote for a fixture table (sample_table/mor/avro/v9_txns_simple_meta), schema left out
V9 = {
    "hoodie.table.initial.version": "9", "hoodie.table.keygenerator.type": "SIMPLE",
    "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.partition.fields": "region",
    "hoodie.table.metadata.partitions": "column_stats,files,partition_stats,record_index",
    "hoodie.archivelog.folder": "archived", "hoodie.timeline.layout.version": "2",
    "hoodie.timeline.history.path": "history", "hoodie.table.checksum": "1101448031",
    "hoodie.datasource.write.drop.partition.columns": "false", "hoodie.table.format": "native",
    "hoodie.table.name": "v9_txns_mor_simple_meta", "hoodie.table.recordkey.fields": "txn_id",
    "hoodie.timeline.path": "timeline", "hoodie.table.ordering.fields": "txn_ts",
    "hoodie.datasource.write.hive_style_partitioning": "true", "hoodie.table.metadata.partitions.inflight": "",
    "hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json", "hoodie.database.name": "default",
    "hoodie.datasource.write.partitionpath.urlencode": "false", "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
    "hoodie.table.version": "9",
}


def test_what_apache_hudi_writes_and_what_we_add_is_known():
    ours = {"hoodie.index.type": "RECORD", "hoodie.record.index.buckets": "16",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS"}
    assert unknown_properties({**V9, **ours}) == []
    assert write_problems({**V9, **ours}) == []


@pytest.mark.parametrize(("key", "value", "named"), [
    ("hoodie.table.format", "xtable", "table format xtable (hoodie.table.format)"),
    ("hoodie.table.cdc.supplemental.logging.mode", "FULL",
     "CDC logging mode FULL (hoodie.table.cdc.supplemental.logging.mode)"),
    ("hoodie.bootstrap.base.path", "/data/src", "bootstrapped tables (hoodie.bootstrap.base.path=/data/src)"),
    ("hoodie.table.multiple.base.file.formats.enable", "TRUE", "multiple base file formats"),
    ("hoodie.partition.metafile.use.base.format", "true", "partition metafiles in the base file format"),
    ("hoodie.table.base.file.format", "orc", "base file format ORC (hoodie.table.base.file.format)"),
    ("hoodie.table.log.file.format", "PARQUET", "log file format PARQUET"),
    ("hoodie.table.partial.update.mode", "IGNORE_DEFAULTS", "partial update mode IGNORE_DEFAULTS"),
    ("hoodie.table.frobnicate", "yes", "properties this engine does not know (from a newer Apache Hudi?): "
                                        "hoodie.table.frobnicate=yes"),
])
def test_each_refusal_names_the_property_and_its_value(key, value, named):
    problems = write_problems({**V9, key: value})
    assert len(problems) == 1 and problems[0].startswith(named), problems


def test_default_values_of_those_properties_are_no_problem():
    defaults = {"hoodie.table.cdc.enabled": "false", "hoodie.bootstrap.index.enable": "false",
                "hoodie.table.multiple.base.file.formats.enable": "false", "hoodie.table.base.file.format": "PARQUET",
                "hoodie.table.log.file.format": "HOODIE_LOG", "hoodie.table.partial.update.mode": "NONE",
                "hoodie.partition.metafile.use.base.format": "false", "hoodie.table.timeline.timezone": "LOCAL"}
    assert write_problems({**V9, **defaults}) == []
