"""Apache Hudi's partition_stats partition (issue 35): each data partition's column ranges, as
Hudi's writer derives them at the last write touching the partition (that write's files and the
other files of the partition's latest slices, counted while the write is inflight), replayed from
the data files, equal record for record what Apache Hudi 1.x wrote; each record sits in the file
group its key hashes to."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.metadata import column_stats as cs
from engine.metadata import partition_stats as ps
from engine.metadata import record_index as ri
from engine.metadata.reader import MetadataTableReader
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from tests.support import hudi1x, partition_stats
from tests.unit.test_metadata_column_stats_format import WITH_COLUMN_STATS

WITH_PARTITION_STATS = [n for n in WITH_COLUMN_STATS if "quickstart" not in n and "nonpart" not in n
                        and "nonpartitioned" not in n]


@pytest.mark.parametrize("name", WITH_PARTITION_STATS)
def test_partition_stats_of_apache_hudi_match_their_replay(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    assert "partition_stats" in metadata_table.partitions_in(meta.config)
    held = partition_stats.check(meta)
    assert held and all(v["isTightBound"] and not v["isDeleted"] and v["fileName"] for v in held.values())
    reader = MetadataTableReader(meta, meta.timeline())
    groups = sorted(sl.file_id for sl in reader.slices("partition_stats"))
    assert groups[0] == "partition-stats-0000-0"
    for sl in reader.slices("partition_stats"):
        keys = list(reader.records("partition_stats", file_ids=[sl.file_id]))
        assert all(g == groups.index(sl.file_id) for g in ri.file_groups_of(keys, len(groups)).tolist())


def test_a_partition_range_widens_over_files_and_takes_the_column_type() -> None:
    """Ranges of one column in three files (a log of deletes only typed NULL, an older file that
    stored the column as a long) merge into the column's type in the write's schema."""
    string = cs.ValueKind("STRING")
    ranges = [
        cs.ColumnRange("a.parquet", "ts", string, "17", "19", 1, 4, 50, 40),
        cs.ColumnRange("b.parquet", "ts", cs.ValueKind("LONG"), 15, 30, 0, 2, 20, 10),
        cs.ColumnRange(".c.log.1_0-0-0", "ts", cs.NULL_KIND, None, None, 0, 0),
        cs.ColumnRange("a.parquet", "other", string, "x", "y", 0, 4),
    ]
    rec = ps.record("p=1", ps.aggregate("p=1", "ts", string, ranges))
    stats = rec["ColumnStatsMetadata"]
    assert rec["key"] == cs.partition_stats_key("p=1", "ts") and rec["type"] == 6
    assert (stats["fileName"], stats["minValue"]["value"], stats["maxValue"]["value"]) == ("p=1", "15", "30")
    assert (stats["nullCount"], stats["valueCount"], stats["totalSize"], stats["totalUncompressedSize"]) == (1, 6, 70, 50)
    assert stats["isTightBound"] and not stats["isDeleted"] and stats["valueType"]["typeOrdinal"] == 7
    assert ps.aggregate("p=1", "absent", string, ranges) is None
    gone = ps.deleted("p=1", "ts")["ColumnStatsMetadata"]
    assert gone["isDeleted"] and gone["isTightBound"] and gone["valueCount"] == -1 and gone["fileName"] == ""
    # a tight bound replaces the older record of its key (it is no widening of it)
    older = ps.record("p=1", cs.ColumnRange("p=1", "ts", string, "00", "99", 0, 100))
    assert cs.comparable(cs.merge(older, rec)) == cs.comparable(rec)


@pytest.mark.parametrize("name", ["sample_table/mor/avro/v9_txns_simple_meta", "sample_table/cow/v9_txns_simple_meta"])
def test_building_partition_stats_gives_hudis_ranges(tmp_path: Path, name: str) -> None:
    """`hoodie index build --partition partition_stats` after dropping the ones Apache Hudi 1.1
    wrote: one record per partition and column, the same range (minimum and maximum) as Hudi's on
    all 48; the counts are those of the latest slices (Hudi's writes count the versions an update
    replaced too, so theirs are never lower); one file group at the next initializing instant; a
    second build is refused with the table unchanged."""
    import json

    from engine.cli import main
    from engine.errors import InvalidInputError
    from engine.metadata import records as mdr
    from engine.metadata.reader import MetadataTableReader
    from engine.services.maintenance import Maintenance
    from tests.support.tables import tree_bytes

    path = hudi1x.fixture(name, tmp_path).table

    def held() -> dict[str, dict]:
        meta = MetaClient.open(str(path))
        return {k: v["ColumnStatsMetadata"] for k, v in
                MetadataTableReader(meta, meta.timeline()).records(mdr.PARTITION_STATS).items()}

    hudis = held()
    assert len(hudis) == 48
    assert Maintenance(MetaClient.open(str(path))).drop_metadata_partition("partition_stats") == ["partition_stats"]
    assert main(["index", "build", str(path), "--partition", "partition_stats", "--json"]) == 0
    ours = held()
    assert set(ours) == set(hudis)
    for key, theirs in hudis.items():
        mine = ours[key]
        assert (mine["fileName"], mine["columnName"], mine["minValue"], mine["maxValue"], mine["isTightBound"]) == (
            theirs["fileName"], theirs["columnName"], theirs["minValue"], theirs["maxValue"], True), key
        assert 0 < mine["valueCount"] <= theirs["valueCount"]
    files = sorted(p.name for p in (path / ".hoodie" / "metadata" / "partition_stats").iterdir() if p.is_file())
    assert files == [".hoodie_partition_metadata", "partition-stats-0000-0_0-0-0_00000000000000005.hfile"]
    props = dict(MetaClient.open(str(path)).config.extra)
    assert "partition_stats" in props["hoodie.table.metadata.partitions"].split(",")
    defs = json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert "partition_stats" not in defs  # Hudi defines none: it follows the column statistics
    before = tree_bytes(path)
    with pytest.raises(InvalidInputError, match="has partition statistics already"):
        Maintenance(MetaClient.open(str(path))).build_metadata_partition_stats()
    assert tree_bytes(path) == before
