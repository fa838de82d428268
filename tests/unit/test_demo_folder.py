"""`python -m engine.demo --name X` wipes X's folder only when it is the demo's own table
(engine/demo/folder.py); otherwise it refuses, before Spark starts, and deletes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.demo.__main__ import check_table_path
from engine.demo.folder import MARKER, mark
from engine.storage import storage_for
from engine.table.create import new_table_config
from engine.table.meta_client import MetaClient
from tests.support import handmade
from tests.support.tables import tree_bytes

REPO = Path(__file__).resolve().parents[2]


def _env(root: Path) -> dict[str, str]:
    return {"CONSOLE_WAREHOUSE_ROOTS": str(root)}


def test_a_missing_or_empty_folder_may_be_used(tmp_path):
    assert check_table_path("tour_trips", _env(tmp_path)) is None
    (tmp_path / "tour_trips").mkdir()
    assert check_table_path("tour_trips", _env(tmp_path)) is None


def test_the_demos_own_table_may_be_replaced(tmp_path):
    t = handmade.create(str(tmp_path / "mine"), name="other_name")
    handmade.add_commit(t, {"paris": ["new"]})
    mark(t.meta.storage, "mine")
    assert check_table_path("mine", _env(tmp_path)) is None
    assert (tmp_path / "mine" / MARKER).read_text() == '{"made_by": "engine.demo", "name": "mine"}'
    # a demo table from before the marker: its name and the demo's key, partition and precombine fields
    legacy = handmade.create(str(tmp_path / "tour_trips"), name="tour_trips")
    handmade.add_commit(legacy, {"paris": ["new"]})
    assert check_table_path("tour_trips", _env(tmp_path)) is None


def test_a_folder_that_is_not_the_demos_table_is_refused(tmp_path):
    folder = tmp_path / "tour_trips"
    folder.mkdir()
    for i in range(7):
        (folder / f"report-{i}.txt").write_text("mine")
    assert check_table_path("tour_trips", _env(tmp_path)) == (
        f"{folder} exists and is not a demo table (it holds report-0.txt, report-1.txt, report-2.txt, "
        f"report-3.txt, report-4.txt …); nothing was deleted. Choose another --name, or move or delete {folder} "
        "yourself if it is a demo's leftover")

    other = tmp_path / "orders"
    MetaClient.create(storage_for(str(other)), new_table_config(name="orders", record_key="order_id"))
    assert check_table_path("orders", _env(tmp_path)) == (
        f"{other} holds the Hudi table 'orders' (record key order_id), which this demo did not make; nothing was "
        f"deleted. Choose another --name, or move or delete {other} yourself if it is a demo's leftover")

    renamed = handmade.create(str(tmp_path / "rides"), name="trips")  # the demo's shape, another name
    assert "holds the Hudi table 'trips' (record key trip_id), which this demo did not make" in \
        check_table_path("rides", _env(tmp_path))
    mark(renamed.meta.storage, "trips")
    assert check_table_path("rides", _env(tmp_path)).startswith(f"{tmp_path / 'rides'} is the demo table 'trips', not 'rides'")


def test_the_command_refuses_and_deletes_nothing(tmp_path):
    folder = tmp_path / "lake" / "precious"
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text("a,b\n1,2\n")
    before = tree_bytes(folder)
    done = subprocess.run([sys.executable, "-m", "engine.demo", "--name", "precious", "--no-console"], cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "CONSOLE_WAREHOUSE_ROOTS": str(tmp_path / "lake")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"python -m engine.demo: {folder} exists and is not a demo table (it holds data.csv); nothing was deleted. "
        f"Choose another --name, or move or delete {folder} yourself if it is a demo's leftover\n")
    assert tree_bytes(folder) == before

