"""Data skipping from Apache Hudi's column statistics (issue 35): a predicate against a file's
range (`range_may_match`) and, on the tables Apache Hudi wrote, the file slices a filtered read
keeps: every slice skipped holds no matching record (read back to check), and some are skipped."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.data.slice_reader import SliceFiles
from engine.read import data_skipping
from engine.read.plan import plan_snapshot
from engine.read.prune import Predicate, range_may_match
from engine.table.meta_client import MetaClient
from tests.support import hudi1x


def _stats(low, high, nulls=0, values=10):
    return {"min": low, "max": high, "nullCount": nulls, "valueCount": values}


S, L = pa.string(), pa.int64()


@pytest.mark.parametrize(("pred", "stats", "t", "kind", "may"), [
    (Predicate("c", "eq", "m"), _stats("a", "k"), S, "STRING", False),
    (Predicate("c", "eq", "b"), _stats("a", "k"), S, "STRING", True),
    (Predicate("c", "in", ("x", "z")), _stats("a", "k"), S, "STRING", False),
    (Predicate("c", "in", ("x", "c")), _stats("a", "k"), S, "STRING", True),
    (Predicate("c", "gt", 9), _stats(1, 9), L, "LONG", False),
    (Predicate("c", "ge", 9), _stats(1, 9), L, "LONG", True),
    (Predicate("c", "lt", 1), _stats(1, 9), L, "LONG", False),
    (Predicate("c", "le", 1), _stats(1, 9), L, "LONG", True),
    (Predicate("c", "eq", 5), _stats(None, None, nulls=10), L, "LONG", False),  # all null
    (Predicate("c", "eq", 5), _stats(None, None, nulls=0, values=0), L, "NULL", False),  # no record (deletes only)
    (Predicate("c", "is_null"), _stats(1, 9), L, "LONG", False),
    (Predicate("c", "is_null"), _stats(1, 9, nulls=1), L, "LONG", True),
    (Predicate("c", "is_not_null"), _stats(None, None, nulls=10), L, "LONG", False),
    (Predicate("c", "is_null", negated=True), _stats(None, None, nulls=10), L, "LONG", False),
    (Predicate("c", "eq", 50, negated=True), _stats(50, 50), L, "LONG", True),  # NOT: never skipped
    (Predicate("c", "starts_with", "TXN-1"), _stats("TXN-001", "TXN-009"), S, "STRING", False),
    (Predicate("c", "starts_with", "TXN-00"), _stats("TXN-001", "TXN-009"), S, "STRING", True),
    (Predicate("c", "starts_with", "A"), _stats("AB", "B"), S, "STRING", True),
    (Predicate("c", "eq", dt.date(1970, 1, 5)), _stats(1, 3), pa.date32(), "DATE", False),
    (Predicate("c", "eq", dt.date(1970, 1, 3)), _stats(1, 3), pa.date32(), "DATE", True),
    (Predicate("c", "eq", "5"), _stats(1, 3), L, "LONG", True),  # a literal of another type: Spark casts
    (Predicate("c", "eq", 1.5), _stats(1.0, 1.2), pa.float64(), "DOUBLE", True),  # floating point: not skipped
    (Predicate("c", "gt", Decimal("25.00")), _stats(b"\x00", b"\t\xc4"), pa.decimal128(10, 2), "DECIMAL", False),
    (Predicate("c", "ge", Decimal("25")), _stats(b"\x00", b"\t\xc4"), pa.decimal128(10, 2), "DECIMAL", True),
    (Predicate("c", "lt", Decimal("-0.01")), _stats(b"\x00", b"\t\xc4"), pa.decimal128(10, 2), "DECIMAL", False),
    (Predicate("c", "eq", Decimal("NaN")), _stats(b"\x00", b"\t\xc4"), pa.decimal128(10, 2), "DECIMAL", True),
    (Predicate("c", "eq", 5), None, L, "LONG", True),  # no statistics
    (Predicate("c", "eq", 5), _stats(1, 3, values=-1), L, "LONG", True),  # a tombstone's counts
    (Predicate("c", "eq", 5), _stats("1", "3"), L, "STRING", True),  # statistics of another type
])
def test_a_predicate_against_a_files_range(pred, stats, t, kind, may) -> None:
    assert range_may_match(pred, stats, t, kind) is may


@pytest.mark.parametrize("name", ["sample_table/cow/v9_txns_simple_meta", "sample_table/mor/avro/v9_txns_simple_meta"])
def test_slices_skipped_on_hudis_tables_hold_no_match(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    plan, timeline = plan_snapshot(meta)
    slices = [SliceFiles.from_slice(s) for s in plan.slices]
    types = {f.name: f.type for f in plan.schema}
    from engine.spark.datasource.reader import read_slice_arrow

    rows = {files.file_id: read_slice_arrow(meta.storage, files, plan.schema, plan.schema.names, plan.how,
                                            plan.base_only) for files in slices}
    for pred in [Predicate("txn_id", "eq", "TXN-003"), Predicate("txn_ts", "gt", 1700700000016),
                 Predicate("merchant_name", "is_null"), Predicate("currency", "eq", "GBP")]:
        skipping = data_skipping.load(meta, timeline, slices, [pred.column])
        assert skipping.notice is None and skipping.stats
        kept = [f for f in slices if skipping.slice_may_match(f, [pred], types)]
        assert 0 < len(kept) < len(slices), pred
        for files in slices:
            col = rows[files.file_id].column(pred.column)
            if pred.op == "is_null":
                matches = pc.is_null(col)
            else:
                fn = pc.equal if pred.op == "eq" else pc.greater
                matches = fn(col, pa.scalar(pred.value, col.type))
            if files not in kept:
                assert pc.sum(matches.cast(pa.int64())).as_py() in (0, None), (pred, files)
    # a metadata table behind the data table: a notice, nothing skipped
    last = timeline.completed_writes.last
    assert last is not None
    (done,) = (fx.table / ".hoodie" / "metadata" / ".hoodie" / "timeline").glob(f"{last.time}_*.deltacommit")
    done.unlink()
    behind = data_skipping.load(MetaClient.open(str(fx.table)), timeline, slices, ["txn_id"])
    assert behind.stats == {} and "no data skipping" in str(behind.notice)
