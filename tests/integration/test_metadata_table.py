"""A metadata table Apache Hudi left is never left stale (issue 23, item 3), where this engine
cannot keep it (issue 35: it keeps those of version 8 and 9 tables, test_metadata_writes.py).

Hand-made version 6 tables (pyarrow, no Spark) carrying what Apache Hudi 0.11+ leaves:
`.hoodie/metadata/` (an internal MOR table whose `files` partition lists the data files) and
`hoodie.table.metadata.partitions` in hoodie.properties. Before this engine changes anything it
removes both, properties first; `hoodie.metadata.enable=true` is refused with the table untouched.
The Spark write path (and hudi-rs reading the result) is covered in test_table_isolation.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import javaproperties
import pytest

from engine.errors import InvalidConfigError
from engine.services.maintenance import Maintenance
from engine.services.repair import RepairReport
from engine.storage import storage_for
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from tests.support import handmade
from tests.support.tables import tree_bytes

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
MDT_FILES = {
    ".hoodie/metadata/.hoodie/hoodie.properties": b"hoodie.table.name=trips_metadata\nhoodie.table.type=MERGE_ON_READ\n",
    ".hoodie/metadata/.hoodie/20260101000000000.deltacommit": b"{}",
    ".hoodie/metadata/files/.files-0000-0_20260101000000000.log.1_0-0-0": b"#HUDI#",
    ".hoodie/metadata/files/.hoodie_partition_metadata": b"#partition metadata\n",
}


def add_metadata_table(path: Path, partitions: str = "files", inflight: str | None = None) -> None:
    """What Apache Hudi leaves: the folder, and the properties naming its partitions."""
    for rel, body in MDT_FILES.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(body)
    meta = MetaClient.open(storage_for(str(path)))
    extra = dict(meta.config.extra)
    extra[metadata_table.PARTITIONS] = partitions
    if inflight is not None:
        extra[metadata_table.PARTITIONS_INFLIGHT] = inflight
    meta.update_config(meta.config.with_updates(extra=tuple(sorted(extra.items()))), "Updated")


def properties(path: Path) -> dict[str, str]:
    return javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())


def table(tmp_path: Path) -> tuple[Path, handmade.Handmade]:
    path = tmp_path / "trips"
    t = handmade.create(str(path))
    handmade.add_commit(t, {"paris": ["new"], "rome": ["new"]}, at=T0)
    handmade.add_commit(t, {"paris": ["update:0"]}, at=T0 + timedelta(minutes=1))
    return path, t


def without_mdt(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if not k.startswith(".hoodie/metadata/") and k != ".hoodie/hoodie.properties"}


def test_repair_removes_the_metadata_table_properties_first_and_keeps_every_other_property(tmp_path):
    path, _t = table(tmp_path)
    add_metadata_table(path, partitions="files,column_stats", inflight="record_index")
    before_props = properties(path)
    before = tree_bytes(path)

    report = Maintenance(MetaClient.open(storage_for(str(path))), MANUAL).repair()

    assert isinstance(report, RepairReport)
    assert report.metadata_table_removed is not None
    assert "partitions: files, column_stats, record_index" in report.metadata_table_removed
    assert not (path / ".hoodie" / "metadata").exists()
    after_props = properties(path)
    expected = {k: v for k, v in before_props.items()
                if k not in (metadata_table.PARTITIONS, metadata_table.PARTITIONS_INFLIGHT)}
    assert after_props == expected
    # nothing but the metadata table and the properties changed
    assert without_mdt(tree_bytes(path)) == without_mdt(before)
    # and it is done: a second repair has nothing to do
    again = Maintenance(MetaClient.open(storage_for(str(path))), MANUAL).repair()
    assert again.metadata_table_removed is None
    assert again.nothing_done


def test_a_dry_run_names_the_removal_and_touches_nothing(tmp_path):
    path, _t = table(tmp_path)
    add_metadata_table(path)
    before = tree_bytes(path)
    report = Maintenance(MetaClient.open(storage_for(str(path))), MANUAL).repair(dry_run=True)
    assert report.dry_run
    assert report.metadata_table_removed is not None
    assert report.metadata_table_removed.startswith("removed Apache Hudi's metadata table (partitions: files) from ")
    assert tree_bytes(path) == before


def test_metadata_enable_true_is_refused_before_anything_is_touched(tmp_path):
    path, _t = table(tmp_path)
    add_metadata_table(path)
    before = tree_bytes(path)
    m = Maintenance(MetaClient.open(storage_for(str(path))), {**MANUAL, "hoodie.metadata.enable": "true"})
    with pytest.raises(InvalidConfigError, match=r"hoodie.metadata.enable=true: this engine cannot keep the metadata "
                       r"table of .* \(table version 6: kept from version 8\)"):
        m.repair()
    with pytest.raises(InvalidConfigError, match=r"leave the option unset \(or false\)"):
        m.clean()
    assert tree_bytes(path) == before


def test_a_table_service_removes_it_before_it_runs(tmp_path):
    """clean (as every write and service) takes the lock, repairs (removing the metadata table),
    then runs; the Maintenance object keeps what the repair did."""
    path, _t = table(tmp_path)
    add_metadata_table(path)
    m = Maintenance(MetaClient.open(storage_for(str(path))), {**MANUAL, "hoodie.metadata.enable": "false"})
    m.clean()
    assert m.last_repair is not None and m.last_repair.metadata_table_removed is not None
    assert not (path / ".hoodie" / "metadata").exists()
    assert metadata_table.PARTITIONS not in properties(path)


def test_a_crash_between_the_two_steps_leaves_a_folder_no_reader_uses_and_the_next_write_removes_it(tmp_path):
    path, _t = table(tmp_path)
    add_metadata_table(path)
    meta = MetaClient.open(storage_for(str(path)))
    # the first step only (what a writer killed after the properties write leaves)
    meta.remove_properties((metadata_table.PARTITIONS, metadata_table.PARTITIONS_INFLIGHT), "Metadata table removed")
    assert metadata_table.PARTITIONS not in properties(path)
    assert (path / ".hoodie" / "metadata").is_dir()
    report = Maintenance(MetaClient.open(storage_for(str(path))), MANUAL).repair()
    assert report.metadata_table_removed is not None
    assert "(partitions:" not in report.metadata_table_removed  # the properties named none any more
    assert not (path / ".hoodie" / "metadata").exists()


def test_a_table_without_one_is_left_alone(tmp_path):
    path, _t = table(tmp_path)
    before = tree_bytes(path)
    report = Maintenance(MetaClient.open(storage_for(str(path))), MANUAL).repair()
    assert report.metadata_table_removed is None and report.nothing_done
    assert tree_bytes(path) == before
