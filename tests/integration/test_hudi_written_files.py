"""Only Hudi's files are Hudi's (issue 32): tables Apache Hudi wrote on a local file system carry
Hadoop's `.crc` checksum files beside every file (hudi-rs's fixtures keep them). They read as Spark
read them, take an upsert that hudi-rs sees, and a rollback deletes a data file's checksum with it
(never a checksum alone); strays in a partition change nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine import Table
from tests.integration.test_hudi1x_fixtures import MARK, _changed_and_added, _oracle, _rows
from tests.support import hudi1x, hudi_rs

pytestmark = pytest.mark.spark

CRC_FIXTURES = ["quickstart_trips_table/mor/avro/table_evo_add_col", "quickstart_trips_table/mor/avro/table_evo_promotion"]


def _data_crcs(table: Path) -> set[str]:
    return {p.name for p in table.rglob(".*.crc") if ".hoodie" not in p.relative_to(table).parts
            and not p.name.startswith("..hoodie_partition_metadata")}


@pytest.mark.parametrize("name", CRC_FIXTURES)
def test_a_table_with_checksum_files_reads_writes_and_rolls_back(spark, tmp_path, name):
    fx = hudi1x.fixture(name, tmp_path)
    crcs = _data_crcs(fx.table)
    logs = sorted(p.name for p in fx.table.rglob(".*.log.*")
                  if not p.name.endswith(".crc") and ".hoodie" not in p.relative_to(fx.table).parts)
    assert logs and {f".{log}.crc" for log in logs} <= crcs  # the reported case: `..<log file>.crc`
    # strays Hudi ignores too
    (fx.table / "_SUCCESS").write_bytes(b"")
    (fx.table / ".DS_Store").write_bytes(b"\0\0")
    table = Table.open(spark, str(fx.table))
    gold = pq.read_table(sorted(fx.gold.glob("*.parquet"))[0])
    ours = table.read().toArrow()
    assert _rows(ours, gold.column_names) == _rows(gold, gold.column_names)

    before = _oracle(fx.table)
    batch, column, _original, _again = _changed_and_added(spark, table)
    result = table.upsert(batch)
    after = _oracle(fx.table)
    assert len(after) == len(before) + 1 and sum(r[column] in MARK.values() for r in after) == 1
    table.maintenance.rollback(result.instant)
    assert _oracle(fx.table) == before and _data_crcs(fx.table) == crcs

    # rolling back Apache Hudi's own last deltacommit deletes its log file and that file's checksum
    last = table.timeline().completed_writes.instants[-1].time
    written = [p.name for p in fx.table.rglob(f".*_{last}.log.*")
               if not p.name.endswith(".crc") and ".hoodie" not in p.relative_to(fx.table).parts]
    assert written, last
    table.maintenance.rollback(last)
    for log in written:
        assert not (fx.table / log).exists() and not (fx.table / f".{log}.crc").exists()
    assert _data_crcs(fx.table) == crcs - {f".{log}.crc" for log in written}
    assert (fx.table / "_SUCCESS").exists() and (fx.table / ".DS_Store").exists()
    ours = Table.open(spark, str(fx.table)).read().toArrow()
    theirs = hudi_rs.arrow_snapshot(str(fx.table))
    cols = [c for c in theirs.column_names if not c.startswith("_hoodie_")]
    assert ours.num_rows == theirs.num_rows and _rows(ours, cols) == _rows(theirs, cols)
