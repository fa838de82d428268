"""Tables without meta fields (`hoodie.populate.meta.fields=false`, Apache Hudi's virtual keys).

Apache Hudi still writes the five `_hoodie_*` columns into such files, null except
`_hoodie_file_name` (checked on its own files below). We read these tables as Apache Hudi does;
writes are refused before anything is touched, and so are incremental reads (the records carry
no commit time), as Apache Hudi refuses them.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import InvalidConfigError, UnsupportedFeatureError
from tests.support import hudi1x, hudi_rs
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

FIXTURES = [
    "sample_table/cow/v6_simplekeygen_hivestyle_no_metafields",
    "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields",
    "sample_table/cow/v8_simplekeygen_hivestyle_no_metafields",
]
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]


@pytest.mark.parametrize("name", FIXTURES)
def test_tables_without_meta_fields_read_as_hudi_rs_reads_them_and_writes_are_refused(spark, name, tmp_path):
    fx = hudi1x.fixture(name, tmp_path)
    files = sorted(p for p in fx.table.rglob("*.parquet"))
    for f in files:  # what Apache Hudi writes: the meta columns are there, and null
        stored = pq.read_table(f, columns=[*META, "_hoodie_file_name"]).to_pylist()
        assert stored and all(r[c] is None for r in stored for c in META), f
        assert {r["_hoodie_file_name"] for r in stored} == {f.name}
    table = Table.open(spark, str(fx.table))
    assert table.config.populate_meta_fields is False
    ours = sorted((r["id"], r["name"], r["byteField"]) for r in table.read().collect())
    theirs = sorted((r["id"], r["name"], r["byteField"]) for r in hudi_rs.snapshot(str(fx.table)))
    assert ours == theirs and len(ours) == 4

    before = tree_bytes(fx.table)
    batch = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")]).limit(1)
    with pytest.raises(InvalidConfigError, match=r"tables without meta fields \(hoodie.populate.meta.fields=false"):
        table.upsert(batch)
    with pytest.raises(UnsupportedFeatureError, match="incremental reads are not supported on tables without meta"):
        table.read_incremental("000")
    assert tree_bytes(fx.table) == before
