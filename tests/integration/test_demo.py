"""`make demo` on the embedded defaults (local Spark, a local warehouse root, the console's SQLite):
every step's rows and instants, the rolled-back bad batch, the clean, and every console page the
demo printed opened through the console's test client.

Runs the demo's entry point (`engine.demo.__main__.run`, what `python -m engine.demo` calls) on the
test run's shared SparkSession instead of a second JVM.
"""

from __future__ import annotations

import re

import pytest

from engine import Table
from engine.demo import trips
from engine.demo.__main__ import run
from tests.support import hudi_rs
from tests.support.console import login, make_app

BASE = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        # the console's environment (make_app sets the warehouse root and database) is the demo's
        app = make_app(tmp, mp)
        mp.delenv("CONSOLE_URL", raising=False)
        mp.delenv("CONSOLE_PORT", raising=False)
        lines: list[str] = []
        report = run(spark=spark, out=lines.append)
        yield app, report, lines


def table_rows(spark, path: str) -> list[tuple]:
    df = Table.open(spark, path).read()
    return sorted(tuple(r) for r in df.select("trip_id", "city", "rider", "driver", "fare", "distance_km", "ts").collect())


def test_the_steps_rows_and_instants(demo, spark):
    _app, report, lines = demo
    i = report.instants
    assert sorted(i) == ["bad", "clean", "delete", "load", "rollback", "upsert"]
    assert i["load"] < i["upsert"] < i["delete"] < i["bad"] < i["rollback"] < i["clean"]
    assert report.counts == {"load": 120, "upsert": 126, "delete": 121, "incremental": 21, "as_of_load": 120,
                             "negative_fares": 30, "after_rollback": 121, "negative_after_rollback": 0,
                             "as_of_load_after_clean": 0}
    assert report.rolled_back == i["bad"]

    # the timeline: the bad commit is gone, its rollback and the clean completed
    timeline = [(x.time, x.action.value, x.state.value) for x in Table.open(None, report.path).timeline()]
    assert timeline == [(i["load"], "commit", "completed"), (i["upsert"], "commit", "completed"),
                        (i["delete"], "commit", "completed"), (i["rollback"], "rollback", "completed"),
                        (i["clean"], "clean", "completed")]

    # the rows after the rollback are exactly the load + upsert - delete, for us and for hudi-rs
    expected = sorted(t.row() for t in trips.expected_after_deletes().values())
    assert len(expected) == 121
    assert table_rows(spark, report.path) == expected
    theirs = hudi_rs.snapshot(report.path)
    assert sorted((r["trip_id"], r["city"], r["rider"], r["driver"], r["fare"], r["distance_km"], r["ts"])
                  for r in theirs) == expected
    commit_of = {r["trip_id"]: r["_hoodie_commit_time"] for r in theirs}
    assert {commit_of["trip-0000"], commit_of["trip-0120"], commit_of["trip-0020"]} == {i["upsert"], i["load"]}
    assert (commit_of["trip-0000"], commit_of["trip-0120"], commit_of["trip-0020"]) == (i["upsert"], i["upsert"], i["load"])

    # what the steps printed
    text = "\n".join(lines)
    assert "1. Bulk load: 120 trips into 3 partitions (oslo, paris, rome)" in text
    assert "2. Upsert: 15 trips updated (a 2.5 tip each), 6 new trips in lisbon" in text
    assert "3. Delete: 5 cancelled trips removed (trip-0015, trip-0016, trip-0017, trip-0018, trip-0019)" in text
    assert f"4. Incremental pull since {i['load']}: 21 trips changed after the load" in text
    assert f"by commit: {{'{i['upsert']}': 21}}" in text
    assert f"5. Time travel: the table as of {i['load']} has 120 trips" in text
    assert "trip-0000: fare then 5.00, now 7.50" in text
    assert "trip-0015: fare then 60.50, now (none)" in text
    assert "trip-0120: fare then (none), now 29.00" in text
    assert f"6. A bad batch: commit {i['bad']} wrote 30 trips with negative fares" in text
    assert f"rollback {i['rollback']} undid {i['bad']}" in text


def test_clean_keeps_one_version_per_file_group(demo):
    _app, report, lines = demo
    view = Table.open(None, report.path).file_system_view()
    groups = [g for p in view.partitions for g in view.groups_in(p)]
    assert [len(g.slices) for g in groups] == [1] * len(groups)
    assert sorted(view.partitions) == ["lisbon", "oslo", "paris", "rome"]
    # one file group per partition; before the clean the load's three groups had three versions each
    # (load, upsert: the tips touch every city, delete: so do the cancellations); the bad batch's
    # versions were rolled back, so the clean deleted two older versions of each
    assert sorted(g.partition for g in groups) == ["lisbon", "oslo", "paris", "rome"]
    assert len(report.cleaned_files) == 6
    assert sorted(f.split("/")[0] for f in report.cleaned_files) == ["oslo", "oslo", "paris", "paris", "rome", "rome"]
    assert "7. Clean: kept each file group's latest version, deleted 6 older file(s)" in lines
    # every base file of the load had a newer version: as of the load, nothing is left to read
    assert f"the table as of {report.instants['load']} now reads 0 trips (120 before the clean)" in "\n".join(lines)


def test_every_printed_console_page_opens(demo):
    app, report, lines = demo
    urls = re.findall(r"console: [^:]+: (\S+)", "\n".join(lines))
    assert len(urls) == len(report.links) == 11
    assert urls == report.links
    i = report.instants
    assert {f"{BASE}/tables/tour_trips/commits/{i[k]}" for k in ("load", "upsert", "delete", "rollback", "clean")} \
        == {u for u in urls if "/commits/" in u}
    assert f"{BASE}/tables/tour_trips/file-groups?partition=lisbon" in urls
    client = app.test_client()
    login(client, "viewer", "viewer-pass-1")
    for url in urls:
        resp = client.get(url.removeprefix(BASE))
        assert resp.status_code == 200, (url, resp.status_code)
    page = client.get(f"/tables/tour_trips/commits/{i['upsert']}").get_data(as_text=True)
    assert i["upsert"] in page and "lisbon" in page
    assert client.get(f"/tables/tour_trips/commits/{i['bad']}").status_code == 404  # rolled back: gone


def test_make_demo_runs_on_the_embedded_defaults(tmp_path):
    """`make demo` itself (the Makefile target, `python -m engine.demo`, its own Spark), with the
    embedded defaults pointed at a temp dir: every step runs and the table reads as the steps say."""
    import os
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSOLE_", "SPARK_MASTER", "AWS_"))}
    env.pop("DATABASE_URL", None)
    env["CONSOLE_WAREHOUSE_ROOTS"] = str(tmp_path / "lake")
    done = subprocess.run(["make", "--no-print-directory", "demo"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "1. Bulk load: 120 trips into 3 partitions (oslo, paris, rome)" in out
    assert "7. Clean: kept each file group's latest version, deleted 6 older file(s)" in out
    assert re.search(r"http://127\.0\.0\.1:8000/tables/tour_trips/commits/\d{17}", out)
    path = tmp_path / "lake" / "tour_trips"
    assert Table.open(None, str(path)).timeline().completed_writes.instants  # a real table there
    assert sorted(r["trip_id"] for r in hudi_rs.snapshot(str(path))) == sorted(trips.expected_after_deletes())
