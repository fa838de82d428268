"""The read client: point lookups through the index (`read_keys`, `hoodie lookup`) and `filter_exists`."""

from __future__ import annotations

import json

import pytest

from engine import InvalidInputError, Table
from engine.cli import main
from tests.support.tables import data_rows, rows

pytestmark = pytest.mark.spark

SCHEMA = "id string, city string, v string, ts long"
DATA = [("a", "paris", "v1", 1), ("b", "rome", "v1", 1), ("c", "paris", "v1", 1), ("d", "oslo", "v1", 1)]


@pytest.fixture(scope="module", params=["SIMPLE", "BLOOM", "GLOBAL_BLOOM"])
def table(spark, tmp_path_factory, request):
    path = tmp_path_factory.mktemp(request.param) / "t"
    t = Table.create(spark, str(path), name="rc", record_key="id", partition_fields="city",
                     precombine_field="ts", index=request.param)
    t.upsert(spark.createDataFrame(DATA, SCHEMA))
    t.upsert(spark.createDataFrame([("c", "paris", "v2", 2)], SCHEMA))
    return t


def test_read_keys_returns_exact_records(table):
    got = rows(table.read_keys(["c", "b", "zz", "c"]))
    assert [(r["id"], r["city"], r["v"]) for r in got] == [("c", "paris", "v2"), ("b", "rome", "v1")]
    assert got == [r for r in rows(table.read()) if r["id"] in ("b", "c")]
    assert rows(table.read_keys(["nope"])) == []
    assert rows(table.read_keys([])) == []


def test_filter_exists_keeps_only_new_keys(spark, table):
    incoming = spark.createDataFrame(
        [("a", "paris", "x", 3), ("e", "paris", "x", 3), ("b", "rome", "x", 3), ("f", "lima", "x", 3)], SCHEMA
    )
    assert data_rows(table.filter_exists(incoming)) == [
        {"id": "e", "city": "paris", "v": "x", "ts": 3}, {"id": "f", "city": "lima", "v": "x", "ts": 3}
    ]
    with pytest.raises(InvalidInputError, match="lacks key column"):
        table.filter_exists(spark.createDataFrame([("x",)], "v string"))


def test_cli_lookup_prints_json_lines(spark, table, tmp_path, capsys):
    keys = tmp_path / "keys.txt"
    keys.write_text("d\nzz\n\na\n")
    assert main(["lookup", table.path, "--keys-file", str(keys)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["city"], r["_hoodie_record_key"]) for r in out] == [("d", "oslo", "d"), ("a", "paris", "a")]
    assert main(["lookup", table.path, "--keys-file", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read --keys-file" in capsys.readouterr().err
