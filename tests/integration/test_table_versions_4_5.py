"""Table versions 4 and 5 (Apache Hudi 0.11 to 0.13; issue 32): read as they are, upgraded to 6 by
the first write as Apache Hudi's writers upgrade them (`engine.table.upgrade`), refused with
`hoodie.write.auto.upgrade=false`; versions below 4 refused with the way on.

The tables: samples Apache Hudi 0.14/0.15 wrote, downgraded by Apache Hudi's own downgrade steps
(tests/support/legacy_tables.py says why no table Hudi 0.11-0.13 wrote is used).
"""

from __future__ import annotations

import javaproperties
import pytest

from engine import Table
from engine.errors import InvalidConfigError, UnsupportedTableVersionError
from engine.table.meta_client import MetaClient
from tests.integration.test_hudi1x_fixtures import MARK, _changed_and_added, _rows
from tests.support import hudi_rs, legacy_tables
from tests.support.samples import sample_table
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

COW = "cow_v6_simplekeygen_nonhivestyle"
MOR = "mor_parquet_v6_simplekeygen_nonhivestyle"


def _props(table) -> dict[str, str]:
    return javaproperties.loads((table / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8"))


def _data(t: Table) -> list[str]:
    ours = t.read().toArrow()
    return _rows(ours, [c for c in ours.column_names if not c.startswith("_hoodie_")])


def _oracle(path, ours: Table) -> list[str]:
    """hudi-rs's snapshot, in our types (as the version 8/9 fixture tests compare them)."""
    mine = ours.read().toArrow()
    cols = [c for c in mine.column_names if not c.startswith("_hoodie_")]
    theirs = hudi_rs.arrow_snapshot(str(path))
    return _rows(theirs.select(cols).cast(mine.select(cols).schema), cols)


@pytest.mark.parametrize("name", [COW, MOR])
@pytest.mark.parametrize("version", [4, 5])
def test_a_legacy_table_reads_as_it_was_and_the_first_write_upgrades_it(spark, tmp_path, name, version):
    original = sample_table(name, tmp_path / "v6")
    table_dir = sample_table(name, tmp_path / f"v{version}")
    expected = _data(Table.open(spark, str(original)))
    # a pending compaction (scheduled on the version 6 copy), so the 5 -> 6 step has an .aux plan to drop
    if name == MOR:
        plan = Table.open(spark, str(table_dir)).maintenance.schedule_compaction()
        assert plan is not None
    legacy_tables.downgrade(table_dir, version)
    before = _props(table_dir)
    assert before["hoodie.table.version"] == str(version)
    t = Table.open(spark, str(table_dir))
    assert t.meta.config.version == version
    assert _data(t) == expected  # snapshot
    first = t.timeline().completed_writes.instants[0].time
    assert _data(t) != [] and len(t.read(as_of=first).collect()) > 0  # time travel
    if name == MOR:
        assert (table_dir / ".hoodie" / ".aux" / f"{plan.instant}.compaction.requested").is_file()
        assert t.read(read_optimized=True).count() == Table.open(spark, str(original)).read(read_optimized=True).count()

    batch, column, _original, _again = _changed_and_added(spark, t)  # one value changed, one record added
    result = t.upsert(batch)
    assert result.repaired is not None and result.repaired.upgraded == f"table version {version} -> 6"
    after = _props(table_dir)
    assert after["hoodie.table.version"] == "6"
    assert {k: v for k, v in after.items() if k != "hoodie.table.version"} == {
        k: v for k, v in before.items() if k != "hoodie.table.version"}  # nothing else changed
    if name == MOR:
        assert not (table_dir / ".hoodie" / ".aux" / f"{plan.instant}.compaction.requested").exists()
    again = Table.open(spark, str(table_dir))
    ours = _data(again)
    if name == MOR:  # hudi-rs 0.5 does not read log files written after a pending compaction: run it first
        again.maintenance.run_compaction(plan.instant, spark=spark)
        assert _data(again) == ours
    assert ours == _oracle(table_dir, again)
    assert len(ours) == len(expected) + 1
    mark = MARK[again.read().schema[column].dataType.typeName()]
    assert sum(1 for r in again.read().select(column).collect() if r[0] == mark) == 1


def test_auto_upgrade_false_refuses_the_write_and_leaves_the_table(spark, tmp_path):
    table_dir = sample_table(COW, tmp_path)
    legacy_tables.downgrade(table_dir, 5)
    t = Table.open(spark, str(table_dir))
    files = tree_bytes(table_dir)
    batch = t.read().limit(1).drop(*[c for c in t.read().columns if c.startswith("_hoodie_")])
    with pytest.raises(UnsupportedTableVersionError, match="hoodie.write.auto.upgrade=false") as err:
        t.upsert(batch, options={"hoodie.write.auto.upgrade": "false"})
    assert "table version 5 is read but written only after an upgrade to version 6" in str(err.value)
    assert str(table_dir / ".hoodie" / "hoodie.properties") in str(err.value)
    assert tree_bytes(table_dir) == files


def test_a_version_4_table_with_a_default_partition_is_not_upgraded_unless_asked(spark, tmp_path):
    table_dir = sample_table(COW, tmp_path)
    legacy_tables.downgrade(table_dir, 4)
    legacy_tables.with_default_partition(table_dir)
    t = Table.open(spark, str(table_dir))
    batch = t.read().limit(1).drop(*[c for c in t.read().columns if c.startswith("_hoodie_")])
    with pytest.raises(InvalidConfigError, match="has a partition named 'default'") as err:
        t.upsert(batch)
    assert str(table_dir / "default") in str(err.value) and "hoodie.skip.default.partition.validation=true" in str(err.value)
    assert _props(table_dir)["hoodie.table.version"] == "4"
    assert not list(t.timeline().pending)
    t.upsert(batch, options={"hoodie.skip.default.partition.validation": "true"})
    assert _props(table_dir)["hoodie.table.version"] == "6"


@pytest.mark.parametrize("version", [1, 2, 3])
def test_versions_below_4_are_refused_with_the_way_on(tmp_path, version):
    table_dir = sample_table(COW, tmp_path)
    legacy_tables.set_version(table_dir, version)
    with pytest.raises(UnsupportedTableVersionError) as err:
        MetaClient.open(str(table_dir))
    message = str(err.value)
    assert f"table version {version} is not supported" in message
    assert "upgrade it with Apache Hudi 0.11 or later first" in message
    assert str(table_dir / ".hoodie" / "hoodie.properties") in message
    assert err.value.version == version
