"""Apache Hudi's metadata table read (issue 35.4): the `files` partition of every fixture table
Apache Hudi 1.x wrote lists exactly the committed data files storage holds, with their sizes;
reads plan from it when it is in sync, and list storage (with a notice) when it is missing,
behind or unreadable. Records merge as HoodieMetadataPayload merges them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.errors import CorruptTableError
from engine.metadata import listing
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader, MetadataTableUnavailable
from engine.read.plan import plan_incremental, plan_snapshot
from engine.table.meta_client import MetaClient
from tests.support import hudi1x

WITH_FILES = [
    "quickstart_trips_table/mor/avro/table_evo_add_col",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "sample_table/cow/v9_timebasedkeygen_epochmillis",
    "sample_table/cow/v9_txns_complex_meta",
    "sample_table/cow/v9_txns_nonpart_meta",
    "sample_table/cow/v9_txns_simple_overwrite",
    "sample_table/mor/avro/v9_nonpartitioned_rollback",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "sample_table/cow/v9_lance_txns_simple",
]


def _storage_listing(meta: MetaClient) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for df in meta.list_data_files():
        if parse_base_file_name(df.name) or parse_log_file_name(df.name):
            out.setdefault(df.partition, {})[df.name] = df.size
    return out


def _ours(listed: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The listing without the files this engine does not read (Lance base files)."""
    kept = {p: {n: s for n, s in files.items() if parse_base_file_name(n) or parse_log_file_name(n)}
            for p, files in listed.items()}
    return {p: files for p, files in kept.items() if files}


@pytest.mark.parametrize("name", WITH_FILES)
def test_the_files_partition_lists_what_storage_holds(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    reader = MetadataTableReader(meta, meta.timeline())
    reader.check_in_sync()
    listed = reader.file_listing()
    assert _ours(listed) == _storage_listing(meta)
    # the partition list names every partition, a non-partitioned table as ""
    assert sorted(listed) == sorted(reader.file_listing(sorted(listed)))
    if "lance" not in name:  # this engine refuses to read Lance tables
        plan, _ = plan_snapshot(meta)
        assert (plan.listing, plan.listing_notice) == (listing.METADATA, None)


def test_a_log_written_while_the_compaction_was_planned_joins_the_new_slice(tmp_path: Path) -> None:
    """In v9_txns_complex_meta the metadata compaction 20260307162518840 was planned while the
    deltacommit 20260307162518815 was in flight: its log (named 18815, completed at 20146) is
    not in the base and belongs to the slice after it, as the completion time says."""
    fx = hudi1x.fixture("sample_table/cow/v9_txns_complex_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    (sl,) = MetadataTableReader(meta, meta.timeline()).slices("files")
    assert sl.base == "files/files-0000-0_13-170-402_20260307162518840.hfile"
    assert sl.logs[0] == "files/.files-0000-0_20260307162518815.log.1_3-184-443"
    assert len(sl.logs) == 6


def _latest_write(meta: MetaClient) -> str:
    last = meta.timeline().completed_writes.last
    assert last is not None
    return last.time


def test_a_metadata_table_behind_the_data_table_is_not_used(tmp_path: Path) -> None:
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    last = _latest_write(meta)
    timeline_dir = fx.table / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (completed,) = timeline_dir.glob(f"{last}_*.deltacommit")
    completed.unlink()  # another engine committed `last` without updating the metadata table
    with pytest.raises(MetadataTableUnavailable, match=f"behind the data table: no deltacommit for {last}"):
        MetadataTableReader(meta, meta.timeline()).check_in_sync()
    plan, _ = plan_snapshot(meta)
    assert plan.listing == listing.STORAGE
    assert plan.listing_notice is not None and last in plan.listing_notice
    # the storage listing still sees the commit's files
    assert {s.base_file.name.instant for s in plan.slices if s.base_file} >= {last}


def test_a_failed_write_is_listed_by_neither(tmp_path: Path) -> None:
    """The last write's metadata log was written but neither instant completed: its files are in
    no listing, and the table is in sync without it."""
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    last = _latest_write(meta)
    for folder in (fx.table / ".hoodie" / "timeline", fx.table / ".hoodie" / "metadata" / ".hoodie" / "timeline"):
        (completed,) = [p for p in folder.glob(f"{last}_*") if p.suffix in (".commit", ".deltacommit")]
        completed.unlink()
    meta = MetaClient.open(str(fx.table))
    reader = MetadataTableReader(meta, meta.timeline())
    reader.check_in_sync()
    listed = reader.file_listing()
    names = {n for files in listed.values() for n in files}
    assert not any(n.endswith(f"_{last}.parquet") for n in names)
    storage = _storage_listing(meta)
    assert any(n.endswith(f"_{last}.parquet") for files in storage.values() for n in files)
    assert listed == {p: {n: s for n, s in files.items() if not n.endswith(f"_{last}.parquet")}
                      for p, files in storage.items()}


def test_a_corrupt_metadata_hfile_is_named_and_reads_list_storage(tmp_path: Path) -> None:
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    (sl,) = MetadataTableReader(meta, meta.timeline()).slices("files")
    assert sl.base is not None
    path = fx.table / ".hoodie" / "metadata" / sl.base
    path.write_bytes(path.read_bytes()[:-5000])
    with pytest.raises(CorruptTableError, match=sl.base.rsplit("/", 1)[-1]):
        MetadataTableReader(meta, meta.timeline()).file_listing()
    plan, _ = plan_snapshot(meta)
    assert plan.listing == listing.STORAGE and "not a readable metadata HFile" in (plan.listing_notice or "")
    inc, _ = plan_incremental(meta, "20000101000000000")
    assert inc.listing == listing.STORAGE


def test_version_6_and_tables_without_one_list_storage(tmp_path: Path) -> None:
    fx = hudi1x.fixture("sample_table/cow/v6_simplekeygen_nonhivestyle", tmp_path / "a")
    meta = MetaClient.open(str(fx.table))
    with pytest.raises(MetadataTableUnavailable, match="table version 6"):
        MetadataTableReader(meta, meta.timeline())
    assert listing.data_files(meta, meta.timeline()) == listing.Listing(None, listing.STORAGE)
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_nometa", tmp_path / "b")
    meta = MetaClient.open(str(fx.table))
    assert listing.data_files(meta, meta.timeline()) == listing.Listing(None, listing.STORAGE)
    shutil.rmtree(tmp_path)


def test_the_summary_and_hoodie_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from engine.cli import main
    from engine.metadata.summary import summarize

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    summary = summarize(meta)
    assert (summary.present, summary.listing, summary.reason) == (True, "metadata table", None)
    by_name = {p.name: p for p in summary.partitions}
    assert sorted(by_name) == ["column_stats", "files", "partition_stats", "record_index",
                               "secondary_index_merchant_idx", "secondary_index_txn_date_idx"]
    files = by_name["files"]
    assert (files.named, files.kept, files.file_groups, files.latest_base) == (True, True, 1, "20260307162449278")
    on_disk = [p for p in (fx.table / ".hoodie" / "metadata" / "files").iterdir()
               if not p.name.startswith(".hoodie_partition_metadata")]
    assert (files.files, files.bytes) == (len(on_disk), sum(p.stat().st_size for p in on_disk))
    kept = {n for n, p in by_name.items() if p.kept}
    assert kept == set(by_name)  # every partition is kept by this engine's writes
    assert main(["show", str(fx.table), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metadata_table"]["listing"] == "metadata table"
    assert [p["name"] for p in doc["metadata_table"]["partitions"]] == sorted(by_name)
    assert main(["show", str(fx.table)]) == 0
    text = capsys.readouterr().out
    assert "metadata table: reads list files through metadata table" in text
    assert "secondary_index_txn_date_idx" in text and "no (dropped at the next write)" not in text
    # behind the data table: reads list storage, and nothing is kept (the next write removes it)
    last = meta.timeline().completed_writes.last
    assert last is not None
    (done,) = (fx.table / ".hoodie" / "metadata" / ".hoodie" / "timeline").glob(f"{last.time}_*.deltacommit")
    done.unlink()
    behind = summarize(MetaClient.open(str(fx.table)))
    assert behind.listing == "storage" and "behind the data table" in (behind.reason or "")
    assert not any(p.kept for p in behind.partitions)
    nometa = hudi1x.fixture("sample_table/cow/v9_txns_simple_nometa", tmp_path / "b")
    assert summarize(MetaClient.open(str(nometa.table))).present is False


def _files(entries: dict[str, tuple[int, bool]]) -> dict:
    return {"key": "p", "type": mdr.TYPE_FILE_LIST,
            "filesystemMetadata": {n: {"size": s, "isDeleted": d} for n, (s, d) in entries.items()}}


def test_files_records_merge_as_hudis_payload() -> None:
    base = _files({"a.parquet": (10, False), ".a.log.1": (5, False)})
    grown = _files({".a.log.1": (9, False), "b.parquet": (7, False)})
    shrunk = _files({".a.log.1": (3, False)})  # sizes only grow: the larger one stays
    gone = _files({"a.parquet": (0, True), "c.parquet": (0, True)})  # c: a tombstone for a file not listed
    merged = mdr.merge_all([base, grown, shrunk, gone])
    assert mdr.live_files(merged) == {".a.log.1": 9, "b.parquet": 7}
    assert merged is not None and merged["filesystemMetadata"]["c.parquet"] == {"size": 0, "isDeleted": True}
    # the tombstone carried forward removes the file from a base merged under it
    assert mdr.live_files(mdr.combine_file_lists(_files({"c.parquet": (4, False)}), merged)) == {
        ".a.log.1": 9, "b.parquet": 7}
    # a DELETE resets the key; other record types are replaced by the newer version (column
    # statistics merge as tests/unit/test_metadata_column_stats_format.py shows)
    assert mdr.merge_all([base, None, grown]) == grown
    located = [{"key": "k", "type": mdr.TYPE_RECORD_INDEX, "v": 1}, {"key": "k", "type": mdr.TYPE_RECORD_INDEX, "v": 2}]
    assert mdr.merge_all(located) == located[1]
    assert mdr.partition_key("") == "." and mdr.data_partition(".") == "" and mdr.data_partition("a=1") == "a=1"


def test_records_for_a_commit_skip_the_tables_own_folders() -> None:
    from engine.metadata.file_changes import records_for
    from engine.timeline.commit_metadata import CommitMetadata, WriteStat
    from engine.timeline.instant import Action, Instant, State

    stats = {
        "city=oslo": [WriteStat(fileId="f1", path="city=oslo/f1_0-1-1_20260101000000000.parquet",
                                partitionPath="city=oslo", fileSizeInBytes=10)],
        ".hoodie/.record_index": [WriteStat(fileId="b", path=".hoodie/.record_index/b.parquet",
                                            partitionPath=".hoodie/.record_index", fileSizeInBytes=5)],
    }
    body = CommitMetadata(stats, "UPSERT").to_bytes()
    out = records_for(Instant("20260101000000000", Action.COMMIT, State.COMPLETED), body)
    assert out == [
        {"key": "__all_partitions__", "type": 1, "filesystemMetadata": {"city=oslo": {"size": 0, "isDeleted": False}}},
        {"key": "city=oslo", "type": 2,
         "filesystemMetadata": {"f1_0-1-1_20260101000000000.parquet": {"size": 10, "isDeleted": False}}},
    ]
    assert records_for(Instant("20260101000000000", Action.SAVEPOINT, State.COMPLETED), b"") == []
    # a restore: tombstones for the files each instant it rolled back deleted
    from engine.timeline import avro_models

    rollback = {"startRollbackTime": "20260101000000002", "timeTakenInMillis": 1, "totalFilesDeleted": 1,
                "commitsRollback": ["20260101000000001"], "version": 1,
                "instantsRollback": [{"commitTime": "20260101000000001", "action": "commit"}],
                "partitionMetadata": {"city=oslo": {
                    "partitionPath": "city=oslo", "failedDeleteFiles": [], "rollbackLogFiles": None,
                    "writtenLogFiles": None,
                    "successDeleteFiles": ["file:/t/city=oslo/f2_0-1-1_20260101000000001.parquet"]}}}
    body = avro_models.serialize("HoodieRestoreMetadata", {
        "startRestoreTime": "20260101000000002", "timeTakenInMillis": 1, "version": 1,
        "instantsToRollback": ["20260101000000001"],
        "hoodieRestoreMetadata": {"20260101000000001": [rollback]},
        "restoreInstantInfo": [{"commitTime": "20260101000000001", "action": "commit"}]})
    assert records_for(Instant("20260101000000002", Action.RESTORE, State.COMPLETED), body) == [
        {"key": "city=oslo", "type": 2,
         "filesystemMetadata": {"f2_0-1-1_20260101000000001.parquet": {"size": 0, "isDeleted": True}}},
    ]


def test_hoodie_index_drop_and_build_of_metadata_partitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import javaproperties

    from engine.cli import main
    from tests.support import hudi_rs
    from tests.support.tables import tree_bytes

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    rows = sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table))
    props = fx.table / ".hoodie" / "hoodie.properties"
    mdt = fx.table / ".hoodie" / "metadata"
    before = tree_bytes(fx.table)
    assert main(["index", "drop", str(fx.table), "--partition", "nope"]) == 2
    assert "has no metadata partition 'nope'" in capsys.readouterr().err
    assert tree_bytes(fx.table) == before
    assert main(["index", "drop", str(fx.table), "--partition", "column_stats", "--json"]) == 0
    # the partition statistics go with the column statistics; the record and secondary indexes stay
    assert json.loads(capsys.readouterr().out)["dropped"] == ["column_stats", "partition_stats"]
    secondary = ["secondary_index_merchant_idx", "secondary_index_txn_date_idx"]
    assert javaproperties.loads(props.read_text())["hoodie.table.metadata.partitions"] == ",".join(
        ["files", "record_index", *secondary])
    assert sorted(p.name for p in mdt.iterdir()) == [".hoodie", "files", "record_index", *secondary]
    for partition in secondary:
        assert main(["index", "drop", str(fx.table), "--partition", partition, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["dropped"] == [partition]
    defs = json.loads((fx.table / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert sorted(defs) == ["record_index"]
    assert main(["index", "drop", str(fx.table), "--partition", "record_index", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dropped"] == ["record_index"]
    assert javaproperties.loads(props.read_text())["hoodie.table.metadata.partitions"] == "files"
    assert sorted(p.name for p in mdt.iterdir()) == [".hoodie", "files"]
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table)) == rows
    assert main(["index", "drop", str(fx.table), "--partition", "files"]) == 0
    assert not mdt.exists() and "hoodie.table.metadata.partitions" not in javaproperties.loads(props.read_text())
    assert main(["index", "build", str(fx.table), "--partition", "bloom_filters"]) != 0
    assert "builds the files, record_index, column_stats, partition_stats and secondary_index_<name>" in (
        capsys.readouterr().err)
    assert main(["index", "build", str(fx.table), "--partition", "partition_stats"]) == 2
    assert "partition statistics are derived from the column statistics" in capsys.readouterr().err
    assert main(["index", "build", str(fx.table), "--partition", "files", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "path": str(fx.table), "partition": "files", "created": True, "listing": "metadata table"}
    meta = MetaClient.open(str(fx.table))
    reader = MetadataTableReader(meta, meta.timeline())
    reader.check_in_sync()
    assert _ours(reader.file_listing()) == _storage_listing(meta)
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table)) == rows  # hudi-rs lists through it again
