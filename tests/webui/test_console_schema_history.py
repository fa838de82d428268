"""The overview's schema history: each commit that changed the table's schema and what changed, by
column id after an `alter` (schema on read), by name otherwise. Hand-made table, no Spark."""

from __future__ import annotations

import re

import pyarrow as pa

from engine.schema.changes import Move, Rename
from engine.services.maintenance import Maintenance
from tests.support import handmade
from webui.services.schema_log import diff


def _rows(page: str) -> list[str]:
    found = re.findall(r'<tr data-testid="schema-version">(.*?)</tr>', page, flags=re.S)
    return [" | ".join(t.strip() for t in re.sub(r"<[^>]+>", "\n", row).split("\n") if t.strip()) for row in found]


def test_the_overview_lists_schema_changes_by_commit(console):
    t = handmade.create(str(console.root / "evolving"), name="evolving")
    c1 = handmade.add_commit(t, {"paris": ["new"]})
    handmade.add_commit(t, {"paris": ["update:0"]})  # same schema: not listed
    m = Maintenance(t.meta)
    a1 = m.alter([Rename("fare", "amount")]).instant
    a2 = m.alter([Move("amount", first=True)]).instant
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(t.path, "evolving", None)
    page = console.client("viewer").get("/tables/evolving").get_data(as_text=True)
    assert 'data-testid="schema-history"' in page
    assert _rows(page) == [
        f"{a2} | ALTER_SCHEMA | columns reordered: amount, trip_id, city, ts | compared by column id (schema on read)",
        f"{a1} | ALTER_SCHEMA | renamed fare → amount | compared by column id (schema on read)",
        f"{c1} | UPSERT | created: trip_id string, city string, ts int64, fare double",
    ]


def test_diff_by_name_and_by_id():
    old = pa.schema([("a", pa.int32()), ("b", pa.string()), ("c", pa.float64())])
    new = pa.schema([("a", pa.int64()), ("c", pa.float64()), ("d", pa.string())])
    assert diff(old, new) == ["a: int32 → int64", "added d string", "dropped b"]
    renamed = pa.schema([("c", pa.float64()), ("a", pa.int32()), ("x", pa.string())])
    assert diff(old, renamed, {"a": 5, "b": 6, "c": 7}, {"c": 7, "a": 5, "x": 6}) == [
        "renamed b → x", "columns reordered: c, a, x"]
    assert diff(old, renamed) == ["added x string", "dropped b", "columns reordered: c, a, x"]
