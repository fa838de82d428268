"""`hoodie alter` on a hand-made table (no Spark): dry run, the commit, refusals."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main
from tests.support import handmade
from tests.support.tables import tree_bytes, tree_dirs


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_hoodie_alter_dry_run_commit_and_refusals(tmp_path, capsys):
    t = handmade.create(str(tmp_path / "trips"))
    handmade.add_commit(t, {"paris": ["new"]})
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)

    code, out, err = run(capsys, "alter", t.path, "--rename", "fare=amount", "--first", "amount", "--dry-run", "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc == {"dry_run": True, "alter": {
        "instant": None, "changes": ["rename fare to amount", "move amount first"],
        "columns": {"amount": "double", "trip_id": "string", "city": "string", "ts": "int64"}, "version_id": None}}
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs

    for argv, message in [
        (["--drop", "city"], "drop city: 'city' is the table's partition field"),
        (["--rename", "trip_id=id"], "rename trip_id to id: 'trip_id' is the table's record key field"),
        (["--type", "fare=int"], "change fare to int32: column 'fare' is double; only widening changes are allowed (int32 would narrow it)"),
        (["--rename", "fare"], "--rename takes NAME=VALUE, got 'fare'"),
        ([], "give at least one change: --rename, --drop, --type, --first, --after, --before"),
    ]:
        code, out, err = run(capsys, "alter", t.path, *argv)
        assert (code, out) == (2, "") and err == f"hoodie: error: {message}\n", err
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs

    code, out, err = run(capsys, "alter", t.path, "--rename", "fare=amount", "--json")
    assert (code, err) == (0, "")
    done = json.loads(out)["alter"]
    assert done["changes"] == ["rename fare to amount"] and done["version_id"] == int(done["instant"])
    assert list(done["columns"]) == ["trip_id", "city", "ts", "amount"]
    assert (Path(t.path) / ".hoodie" / ".schema" / f"{done['instant']}.schemacommit").is_file()
    code, out, err = run(capsys, "commits", t.path, "--json")
    assert code == 0 and done["instant"] in out and "ALTER_SCHEMA" in out, out
    code, out, err = run(capsys, "show", t.path)
    assert code == 0 and "amount" in out and "fare" not in out


def test_rolling_back_an_alter_restores_the_schema_before_it(tmp_path, capsys):
    t = handmade.create(str(tmp_path / "trips"))
    handmade.add_commit(t, {"paris": ["new"]})
    code, out, _ = run(capsys, "alter", t.path, "--rename", "fare=amount", "--json")
    instant = json.loads(out)["alter"]["instant"]
    assert code == 0 and t.meta.latest_schema().names == ["trip_id", "city", "ts", "amount"]
    code, out, err = run(capsys, "rollback", t.path, instant, "--json")
    assert (code, err) == (0, ""), err
    # the alter's history files go with it: the table has no internal schema
    assert list((Path(t.path) / ".hoodie" / ".schema").iterdir()) == []
    assert t.meta.schema_versions() == []
    schema = t.meta.latest_schema()
    assert schema.names == ["trip_id", "city", "ts", "fare"] and schema.metadata is None
