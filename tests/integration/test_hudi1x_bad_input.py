"""Issue 18's bad input on tables of versions 8 and 9: an unknown table or timeline layout
version, a timeline with both layouts mixed, a truncated Avro instant, or a property this engine
does not know gives a typed error naming the file, and the table stays byte for byte as it was."""

from __future__ import annotations

import re

import pytest

from engine import Table
from engine.errors import CorruptTableError, InvalidConfigError, UnsupportedTableVersionError
from tests.support import hudi1x
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

NAME = "sample_table/cow/v9_txns_simple_meta"


@pytest.fixture()
def table_dir(tmp_path):
    return hudi1x.fixture(NAME, tmp_path).table


def _batch(spark, table: Table):
    df = table.read()
    return df.limit(1).drop(*[c for c in df.columns if c.startswith("_hoodie_")])


def _completed(table_dir):
    timeline = table_dir / ".hoodie" / "timeline"
    return sorted(p for p in timeline.iterdir() if re.fullmatch(r"\d{17}_\d{17}\.commit", p.name))


def _edit_properties(table_dir, old: str, new: str) -> None:
    props = table_dir / ".hoodie" / "hoodie.properties"
    text = props.read_text()
    assert old in text
    props.write_text(text.replace(old, new))


@pytest.mark.parametrize(("old", "new", "message"), [
    ("hoodie.table.version=9", "hoodie.table.version=10", "table version 10 is not supported"),
    ("hoodie.timeline.layout.version=2", "hoodie.timeline.layout.version=3", "timeline layout version 3 is not supported"),
])
def test_an_unknown_table_or_layout_version_is_refused_at_open(spark, table_dir, old, new, message):
    _edit_properties(table_dir, old, new)
    before = tree_bytes(table_dir)
    with pytest.raises(UnsupportedTableVersionError) as refused:
        Table.open(spark, str(table_dir))
    assert str(refused.value).startswith(f"{table_dir / '.hoodie' / 'hoodie.properties'}: {message}")
    assert tree_bytes(table_dir) == before


def test_a_property_this_engine_does_not_know_refuses_writes_not_reads(spark, table_dir):
    table = Table.open(spark, str(table_dir))
    batch = _batch(spark, table)
    expected = table.read().count()
    _edit_properties(table_dir, "hoodie.table.version=9", "hoodie.table.version=9\nhoodie.table.frobnicate=yes")
    table = Table.open(spark, str(table_dir))
    before = tree_bytes(table_dir)
    with pytest.raises(InvalidConfigError) as refused:
        table.upsert(batch)
    assert str(refused.value) == (
        f"{table_dir / '.hoodie' / 'hoodie.properties'}: this version cannot write properties this engine does not "
        "know (from a newer Apache Hudi?): hoodie.table.frobnicate=yes")
    with pytest.raises(InvalidConfigError, match="hoodie.table.frobnicate=yes"):
        table.maintenance.run_compaction()
    assert table.read().count() == expected  # reading changes nothing: allowed
    assert tree_bytes(table_dir) == before


def test_a_timeline_with_both_layouts_mixed_is_refused_naming_the_file(spark, table_dir):
    table = Table.open(spark, str(table_dir))
    batch = _batch(spark, table)
    latest = _completed(table_dir)[-1]
    stray = table_dir / ".hoodie" / "timeline" / (latest.name.split("_")[0] + ".commit")  # layout 1's name
    stray.write_bytes(latest.read_bytes())
    before = tree_bytes(table_dir)
    for attempt in (lambda: Table.open(spark, str(table_dir)).read().count(),
                    lambda: Table.open(spark, str(table_dir)).upsert(batch)):
        with pytest.raises(CorruptTableError) as refused:
            attempt()
        assert str(stray.relative_to(table_dir)) in str(refused.value)
        assert "a timeline with both layouts mixed" in str(refused.value)
    assert tree_bytes(table_dir) == before


def test_a_truncated_avro_instant_is_refused_naming_the_file(spark, table_dir):
    table = Table.open(spark, str(table_dir))
    batch = _batch(spark, table)
    latest = _completed(table_dir)[-1]
    latest.write_bytes(latest.read_bytes()[:-40])
    before = tree_bytes(table_dir)
    for attempt in (lambda: Table.open(spark, str(table_dir)).read().count(),
                    lambda: Table.open(spark, str(table_dir)).upsert(batch),
                    lambda: Table.open(spark, str(table_dir)).commit_metadata(latest.name.split("_")[0])):
        with pytest.raises(CorruptTableError) as refused:
            attempt()
        assert latest.name in str(refused.value), str(refused.value)
    assert tree_bytes(table_dir) == before
