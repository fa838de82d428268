"""Apache Hudi's secondary indexes (issue 35): keys, escaping and file-group hashing as
`SecondaryIndexKeyUtils` and `getSecondaryKeyToFileGroupMappingFunction` have them, and every
secondary index of the fixture tables (V2 over a string and a date column, a V1 one of Hudi 1.0)
equal to its recomputation from the rows hudi-rs reads, each key in the group its value hashes to."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from engine.metadata import record_index as ri
from engine.metadata import secondary_index as si
from engine.table.meta_client import MetaClient
from tests.support import hudi1x, secondary_index

WITH_SECONDARY_INDEXES = [
    "sample_table/cow/v9_txns_complex_meta",
    "sample_table/cow/v9_txns_nonpart_meta",
    "sample_table/cow/v9_txns_simple_meta",
    "sample_table/mor/avro/v9_txns_complex_meta",
    "sample_table/mor/avro/v9_txns_nonpart_meta",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
]


def test_keys_escape_and_split_as_hudi() -> None:
    assert si.key("Uber", "TXN-014") == "Uber$TXN-014"
    assert si.key(None, "TXN-003") == "\x00$TXN-003"
    assert si.key("a$b\\c", "k$1") == "a\\$b\\\\c$k\\$1"
    assert si.split("a\\$b\\\\c$k\\$1") == ("a$b\\c", "k$1")
    assert si.split("\x00$TXN-003") == (None, "TXN-003")
    with pytest.raises(ValueError):
        si.split("no separator")
    # V2 hashes the escaped value and the separator (all keys of one value in one group); V1 the key
    assert si.hashed_part("a\\$b$k", "V2") == "a\\$b$" and si.hashed_part("a\\$b$k", "V1") == "a\\$b$k"
    keys = ["Uber$TXN-014", "Uber$TXN-099", "Spotify$TXN-018"]
    assert si.file_groups_of(keys, 10, "V2").tolist() == [ri.file_group_of("Uber$", 10)] * 2 + [
        ri.file_group_of("Spotify$", 10)]
    assert si.file_groups_of(keys, 10, "V1").tolist() == [ri.file_group_of(k, 10) for k in keys]
    assert si.group_prefix("secondary_index_merchant_idx") == "secondary-index-merchant-idx-"


def test_values_render_as_sparks_internal_values() -> None:
    assert si.texts(pa.array([dt.date(2024, 1, 15), None])) == ["19737", None]
    assert si.texts(pa.array([True, False])) == ["true", "false"]
    assert si.texts(pa.array([-5, 7], pa.int64())) == ["-5", "7"]
    assert si.texts(pa.array([Decimal("25.00"), Decimal("-0.10")], pa.decimal128(10, 2))) == ["25.00", "-0.10"]
    assert si.texts(pa.array([1_700_000_000_123], pa.timestamp("ms"))) == ["1700000000123000"]
    assert si.texts(pa.array([1_700_000_000_123_456], pa.timestamp("us", "UTC"))) == ["1700000000123456"]
    with pytest.raises(si.UnsupportedValue):
        si.texts(pa.array([1.5]))


@pytest.mark.parametrize("name", WITH_SECONDARY_INDEXES)
def test_secondary_indexes_of_apache_hudi_match_the_rows(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    held = secondary_index.check(MetaClient.open(str(fx.table)))
    assert held and all(keys for keys in held.values())


@pytest.mark.parametrize("name", ["sample_table/cow/v9_txns_simple_meta", "sample_table/mor/avro/v9_txns_nonpart_meta"])
def test_key_filters_find_their_file_groups_through_the_indexes(name: str, tmp_path: Path) -> None:
    """`index_skipping.key_holders`: an equality on a secondary-index column or on the record key
    names exactly the file groups the record index puts the matching rows' keys in."""
    from engine.read.index_skipping import key_holders
    from engine.read.prune import Predicate
    from tests.support import hudi_rs, record_index

    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    timeline = meta.timeline()
    schema = meta.latest_schema(timeline)
    assert schema is not None
    types = {f.name: f.type for f in schema}
    located = record_index.check(meta)
    rows = hudi_rs.snapshot(str(fx.table))
    merchant = sorted(r["merchant_name"] for r in rows if r["merchant_name"] is not None)[0]
    want = {(located[r["txn_id"]].partition, located[r["txn_id"]].file_id) for r in rows if r["merchant_name"] == merchant}
    found = key_holders(meta, timeline, [Predicate("merchant_name", "eq", merchant)], types)
    assert (found.groups, found.by) == (want, "secondary index merchant_idx")
    day = sorted(r["txn_date"] for r in rows)[-1]
    want = {(located[r["txn_id"]].partition, located[r["txn_id"]].file_id) for r in rows if r["txn_date"] == day}
    assert key_holders(meta, timeline, [Predicate("txn_date", "in", (day, dt.date(1999, 1, 1)))], types).groups == want
    key = rows[0]["txn_id"]
    by_key = key_holders(meta, timeline, [Predicate("txn_id", "eq", key)], types)
    assert (by_key.groups, by_key.by) == ({(located[key].partition, located[key].file_id)}, "record key")
    assert key_holders(meta, timeline, [Predicate("txn_id", "eq", "NO-SUCH")], types).groups == frozenset()
    # no equality, a negated one, an unindexed column: nothing to look up
    for pred in (Predicate("txn_id", "gt", key), Predicate("merchant_name", "eq", merchant, negated=True),
                 Predicate("currency", "eq", "USD")):
        assert key_holders(meta, timeline, [pred], types).groups is None


def test_a_dropped_secondary_index_is_built_again_as_hudi_built_it(tmp_path: Path, capsys) -> None:
    """`hoodie index build --partition secondary_index_<name> --columns C` (Hudi's CREATE INDEX):
    after dropping Hudi's index on merchant_name, the build gives back every key, each in the file
    group Hudi had put it in, with the same index definition; refusals change nothing."""
    import json

    from engine.cli import main
    from engine.metadata.reader import MetadataTableReader
    from tests.support.tables import tree_bytes

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    partition = "secondary_index_merchant_idx"

    def placed() -> dict[str, str]:
        meta = MetaClient.open(str(fx.table))
        reader = MetadataTableReader(meta, meta.timeline())
        return {k: sl.file_id for sl in reader.slices(partition) for k in reader.records(partition, file_ids=[sl.file_id])}

    hudis = placed()
    defs_path = fx.table / ".hoodie" / ".index_defs" / "index.json"
    hudi_def = json.loads(defs_path.read_text())["indexDefinitions"][partition]
    assert main(["index", "drop", str(fx.table), "--partition", partition]) == 0
    assert partition not in json.loads(defs_path.read_text())["indexDefinitions"]
    before = tree_bytes(fx.table)
    for bad, why in [(["--partition", "secondary_index_Bad-Name", "--columns", "merchant_name"], "secondary_index_<name>"),
                     (["--partition", partition, "--columns", "no_such"], "no_such is not a column of the table"),
                     (["--partition", partition, "--columns", "txn_metadata,amount"], "name its one column")]:
        assert main(["index", "build", str(fx.table), *bad]) != 0
        assert why in capsys.readouterr().err
        assert tree_bytes(fx.table) == before
    capsys.readouterr()
    assert main(["index", "build", str(fx.table), "--partition", partition, "--columns", "merchant_name", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["column"], doc["file_groups"], doc["keys"]) == ("merchant_name", 10, len(hudis))
    assert placed() == hudis
    assert json.loads(defs_path.read_text())["indexDefinitions"][partition] == hudi_def
    assert secondary_index.check(MetaClient.open(str(fx.table)))[partition] == set(hudis)
    assert main(["index", "build", str(fx.table), "--partition", partition, "--columns", "merchant_name"]) != 0
    assert "has secondary_index_merchant_idx already" in capsys.readouterr().err
