"""Tables of versions 8 and 9 that we create (`Table.create(table_version=...)`, `hoodie init
--table-version`): every write and table service leaves a table in timeline layout 2 that hudi-rs
reads as we do, step by step (the random sequences are in test_mor_property.py and
test_services_property.py, which run on version 8 too)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import javaproperties
import pytest

from engine import Table
from engine.services.maintenance import Maintenance
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
COMPLETED = re.compile(r"(\d{17})_(\d{17})\.(\w+)")


def ours(t: Table, **kw) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(t.read(**kw)))


def theirs(t: Table, as_of: str | None = None) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(t.path, as_of))


def timeline_files(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(requested time, action) of the completed instants in order of requested time, and the
    names of the other (requested / inflight) files of `.hoodie/timeline/`."""
    names = sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file())
    done = [(m.group(1), m.group(3)) for n in names if (m := COMPLETED.fullmatch(n))]
    return done, [n for n in names if not COMPLETED.fullmatch(n)]


@pytest.mark.parametrize(("version", "table_type"), [(8, "COPY_ON_WRITE"), (9, "MERGE_ON_READ")])
def test_a_table_we_create_in_version_8_or_9_takes_writes_and_services_as_hudi_rs_reads_them(
        spark, tmp_path, version, table_type):
    path = tmp_path / "t"
    t = Table.create(spark, str(path), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", table_type=table_type, table_version=version)
    props = javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == (str(version), "2")
    write = "commit" if table_type == "COPY_ON_WRITE" else "deltacommit"

    load = t.insert if version == 8 else t.bulk_insert
    first = load(spark.createDataFrame([(1, "a", "oslo", 1), (2, "b", "lima", 1), (3, "c", "oslo", 1)], SCHEMA),
                 options=MANUAL)
    s1 = [(1, "a", "oslo", 1), (2, "b", "lima", 1), (3, "c", "oslo", 1)]
    assert ours(t) == theirs(t) == s1
    second = t.upsert(spark.createDataFrame([(1, "a2", "oslo", 2), (4, "d", "rome", 2)], SCHEMA), options=MANUAL)
    s2 = sorted([(1, "a2", "oslo", 2), (2, "b", "lima", 1), (3, "c", "oslo", 1), (4, "d", "rome", 2)])
    assert ours(t) == theirs(t) == s2
    third = t.delete(spark.createDataFrame([(2, "x", "lima", 0)], SCHEMA), options=MANUAL)
    s3 = [r for r in s2 if r[0] != 2]
    assert ours(t) == theirs(t) == s3
    # time travel to each write, ours and hudi-rs's
    for instant, state in ((first.instant, s1), (second.instant, s2), (third.instant, s3)):
        assert ours(t, as_of=instant) == theirs(t, instant) == state, instant
    services = []
    if table_type == "MERGE_ON_READ":
        compacted = Maintenance(t.meta, MANUAL).run_compaction()
        assert compacted is not None
        services.append((compacted.instant, "commit"))
        assert ours(t) == theirs(t) == ours(t, read_optimized=True) == s3
    # the slices the latest write replaced go: first's oslo and lima file versions (MOR: the
    # slices the compaction replaced)
    cleaned = Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
                                   "hoodie.cleaner.commits.retained": "1"}).clean()
    assert cleaned is not None and cleaned.instant and len(cleaned.deleted) >= 2, cleaned
    assert ours(t) == theirs(t) == s3
    saved = services[-1][0] if services else third.instant
    sp = t.maintenance.create_savepoint(saved)
    fourth = t.upsert(spark.createDataFrame([(5, "e", "lima", 3)], SCHEMA), options=MANUAL)
    s4 = sorted([*s3, (5, "e", "lima", 3)])
    assert ours(t) == theirs(t) == s4
    rolled = t.maintenance.rollback(fourth.instant)
    assert ours(t) == theirs(t) == s3
    fifth = t.upsert(spark.createDataFrame([(3, "c5", "oslo", 5)], SCHEMA), options=MANUAL)
    assert ours(t) == theirs(t) == sorted([*(r for r in s3 if r[0] != 3), (3, "c5", "oslo", 5)])
    restored = t.maintenance.restore(sp.time)
    assert restored.rolled_back == [fifth.instant] and restored.target == sp.time
    assert ours(t) == theirs(t) == s3

    done, other = timeline_files(path)
    # the rolled-back write and the write the restore took out are gone; their rollback and
    # restore instants stay, and so does the savepoint (named with the instant it keeps)
    expected = [(first.instant, write), (second.instant, write), (third.instant, write), *services,
                (cleaned.instant, "clean"), (sp.time, "savepoint"), (rolled.instant, "rollback"),
                (restored.instant, "restore")]
    assert done == sorted(expected), done
    assert not [n for n in other if not re.fullmatch(r"\d{17}\.\w+\.(requested|inflight)|\d{17}\.inflight", n)], other
    for name in (p.name for p in (path / ".hoodie" / "timeline").iterdir() if COMPLETED.fullmatch(p.name)):
        assert (path / ".hoodie" / "timeline" / name).read_bytes()[:4] == b"Obj\x01", name  # Avro, as 1.x writes
    assert not [p.name for p in (path / ".hoodie").iterdir() if p.is_file() and p.name != "hoodie.properties"]


def test_hoodie_init_creates_a_version_9_table_that_show_reports(tmp_path):
    hoodie = [str(Path(sys.executable).parent / "hoodie")]
    out = subprocess.run([*hoodie, "init", str(tmp_path / "t"), "--name", "trips", "--record-key", "id",
                          "--partition-field", "city", "--precombine", "ts", "--table-version", "9", "--json"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert doc["version"] == 9 and doc["properties"]["hoodie.table.ordering.fields"] == "ts"
    shown = json.loads(subprocess.run([*hoodie, "show", str(tmp_path / "t"), "--json"], capture_output=True,
                                      text=True, check=True).stdout)
    assert (shown["version"], shown["properties"]["hoodie.timeline.layout.version"]) == (9, "2")
    # with a metadata table (its files partition), as Apache Hudi 1.x creates tables
    assert shown["properties"]["hoodie.table.metadata.partitions"] == "files"
    assert shown["metadata_table"]["partitions"][0]["name"] == "files"
    assert (tmp_path / "t" / ".hoodie" / "metadata" / "files").is_dir()
    # --no-metadata: none; --record-index-buckets (this engine's own record index) needs it
    subprocess.run([*hoodie, "init", str(tmp_path / "n"), "--name", "trips", "--record-key", "id", "--table-version",
                    "9", "--no-metadata", "--index", "RECORD", "--record-index-buckets", "4"], check=True,
                   capture_output=True)
    assert not (tmp_path / "n" / ".hoodie" / "metadata").exists()
    refused = subprocess.run([*hoodie, "init", str(tmp_path / "r"), "--name", "trips", "--record-key", "id",
                              "--table-version", "9", "--index", "RECORD", "--record-index-buckets", "4"],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "add --no-metadata to keep it" in refused.stderr
    assert not (tmp_path / "r").exists()
    bad = subprocess.run([*hoodie, "init", str(tmp_path / "u"), "--name", "trips", "--record-key", "id",
                          "--table-version", "7"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 7" in bad.stderr
    assert not (tmp_path / "u").exists()
