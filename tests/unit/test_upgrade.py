"""engine.table.upgrade on hand-made tables (no Spark): the steps of Apache Hudi's 4 -> 5 -> 6
upgrade, the metadata table first, and a crash before the last step leaving a table of the old
version that the next attempt upgrades."""

from __future__ import annotations

from pathlib import Path

import javaproperties
import pytest

from engine.config.table_config import TableConfig
from engine.errors import InvalidConfigError, StorageError
from engine.storage import storage_for
from engine.table import upgrade
from tests.support import handmade, legacy_tables


def _legacy(tmp_path: Path, version: int) -> tuple[Path, TableConfig]:
    t = handmade.create(str(tmp_path / "t"))
    handmade.add_commit(t, {"paris": ["new"], "rome": ["new"]})
    root = Path(t.path)
    (root / ".hoodie" / "20260101000500000.compaction.requested").write_bytes(b"plan")
    legacy_tables.downgrade(root, version)
    mdt = root / ".hoodie" / "metadata" / ".hoodie"
    mdt.mkdir(parents=True)
    (mdt / "hoodie.properties").write_text(
        f"hoodie.table.name=trips_metadata\nhoodie.table.version={version}\nhoodie.table.type=MERGE_ON_READ\n")
    return root, TableConfig.from_text((root / ".hoodie" / "hoodie.properties").read_text())


def _version(path: Path) -> str:
    return javaproperties.loads(path.read_text())["hoodie.table.version"]


@pytest.mark.parametrize("version", [4, 5])
def test_the_upgrade_steps(tmp_path, version):
    root, config = _legacy(tmp_path, version)
    before = javaproperties.loads((root / ".hoodie" / "hoodie.properties").read_text())
    assert (root / ".hoodie" / ".aux" / "20260101000500000.compaction.requested").is_file()
    report = upgrade.upgrade(storage_for(str(root)), config, ["20260101000500000"])
    assert (report.from_version, report.to_version, str(report)) == (version, 6, f"table version {version} -> 6")
    assert report.aux_plans_removed == (".hoodie/.aux/20260101000500000.compaction.requested",)
    assert report.metadata_table == f"{version} -> 6"
    after = javaproperties.loads((root / ".hoodie" / "hoodie.properties").read_text())
    assert after == {**before, "hoodie.table.version": "6"}
    assert list(after) == list(before)  # the entries in their order
    assert _version(root / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties") == "6"
    assert not (root / ".hoodie" / ".aux" / "20260101000500000.compaction.requested").exists()
    assert (root / ".hoodie" / "20260101000500000.compaction.requested").read_bytes() == b"plan"  # the timeline's


def test_a_crash_before_the_version_is_written_leaves_the_old_version_to_upgrade_again(tmp_path):
    root, config = _legacy(tmp_path, 5)
    storage = storage_for(str(root))

    class Crash(type(storage)):  # the process dies as it writes the data table's properties
        def write_bytes(self, rel, data):
            if rel == ".hoodie/hoodie.properties":
                raise StorageError("power cut")
            super().write_bytes(rel, data)

    with pytest.raises(StorageError):
        upgrade.upgrade(Crash(str(root)), config, ["20260101000500000"])
    assert _version(root / ".hoodie" / "hoodie.properties") == "5"  # still a readable version 5 table
    assert TableConfig.from_text((root / ".hoodie" / "hoodie.properties").read_text()).version == 5
    report = upgrade.upgrade(storage, config, ["20260101000500000"])  # the next write's attempt
    assert report.aux_plans_removed == () and report.metadata_table == "left at version 6"
    assert _version(root / ".hoodie" / "hoodie.properties") == "6"


def test_the_default_partition_check_of_4_to_5(tmp_path):
    root, config = _legacy(tmp_path, 4)
    assert config.partition_fields and not config.hive_style
    legacy_tables.with_default_partition(root)
    with pytest.raises(InvalidConfigError, match="has a partition named 'default'"):
        upgrade.upgrade(storage_for(str(root)), config, [])
    assert _version(root / ".hoodie" / "hoodie.properties") == "4"
    # version 5 tables are not checked (Hudi 0.12 already wrote __HIVE_DEFAULT_PARTITION__)
    root5, config5 = _legacy(tmp_path / "five", 5)
    legacy_tables.with_default_partition(root5)
    assert upgrade.upgrade(storage_for(str(root5)), config5, []).to_version == 6
    upgrade.upgrade(storage_for(str(root)), config, [], skip_default_partition_validation=True)
    assert _version(root / ".hoodie" / "hoodie.properties") == "6"


def test_auto_upgrade_false_is_refused_before_anything(tmp_path):
    _root, config = _legacy(tmp_path, 5)
    with pytest.raises(Exception, match="hoodie.write.auto.upgrade=false forbids"):
        upgrade.check_allowed(config, False, "x/.hoodie/hoodie.properties")
    upgrade.check_allowed(config, True, "x")
    six = config.with_updates(version=6)
    upgrade.check_allowed(six, False, "x")  # nothing to upgrade: nothing refused
    with pytest.raises(ValueError):
        upgrade.upgrade(storage_for(str(tmp_path)), six, [])
