"""The demo's steps on Spark: load, upsert, delete, incremental pull, time travel, a bad batch
rolled back, clean. Each step prints what the engine did and the console page that shows it.

`run_tour` takes the SparkSession, the table's URI and where to print; it returns a `TourReport`
(instants and row counts of every step) that the demo's test checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.api import Table
from engine.demo import folder as demo_folder
from engine.demo import trips
from engine.demo.links import ConsoleLinks
from engine.services.maintenance import Maintenance
from engine.storage import storage_for

# The walkthrough cleans by hand at its last step, so the writes leave old file versions alone.
WRITE_OPTIONS = {"hoodie.clean.automatic": "false"}
# ... and then keeps only each file group's latest version.
CLEAN_OPTIONS = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"}


@dataclass
class TourReport:
    """What each step did: instants by step name and the row counts the demo showed."""

    path: str
    instants: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    rolled_back: str | None = None
    cleaned_files: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


class _Printer:
    def __init__(self, out: Callable[[str], None], links: ConsoleLinks, report: TourReport) -> None:
        self.out, self.links, self.report = out, links, report

    def step(self, title: str) -> None:
        self.out("")
        self.out(title)

    def line(self, text: str) -> None:
        self.out(f"   {text}")

    def see(self, what: str, url: str) -> None:
        self.report.links.append(url)
        self.out(f"   console: {what}: {url}")


def _frame(spark: SparkSession, rows: list[trips.Trip]) -> DataFrame:
    return spark.createDataFrame([t.row() for t in rows], trips.SCHEMA)


def _fares(df: DataFrame, ids: list[str]) -> dict[str, float]:
    return {r["trip_id"]: r["fare"] for r in df.where(F.col("trip_id").isin(ids)).select("trip_id", "fare").collect()}


def run_tour(spark: SparkSession, path: str, name: str, links: ConsoleLinks,
             out: Callable[[str], None] = print, register: Callable[[str], str] | None = None) -> TourReport:
    """Create the table `name` at `path` (replacing what a previous run left there; anything
    else there is refused with `DemoFolderError`, see `engine.demo.folder`) and walk it
    through the steps. `register(table_uri)` is called once the table exists (the console's
    registration) and returns the line to print."""
    storage = storage_for(path)
    demo_folder.check_replaceable(storage, name)  # never wipe a folder that is not this demo's table
    storage.delete_dir("")
    table = Table.create(spark, path, name=name, record_key="trip_id", partition_fields="city",
                         precombine_field="ts")
    demo_folder.mark(storage, name)
    report = TourReport(path=table.path)
    p = _Printer(out, links, report)
    out(f"hoodie demo: a trips table `{name}` at {table.path} (record key trip_id, partitioned by city, "
        "newest ts wins)")
    if register is not None:
        out(register(table.path))
    watched = [trips.trip_id(i) for i in (0, 15, 20, trips.INSERTED[0])]

    # 1. bulk load
    r = table.bulk_insert(_frame(spark, trips.load_batch()), WRITE_OPTIONS)
    assert r.instant is not None
    report.instants["load"] = load = r.instant
    report.counts["load"] = table.read().count()
    p.step(f"1. Bulk load: {r.inserts} trips into {len(r.partitions)} partitions ({', '.join(sorted(r.partitions))})")
    p.line(f"commit {load} (bulk_insert) wrote {r.files_written} base file(s): new file groups, no index lookup")
    p.see("the commit", links.commit(load))
    p.see("its file groups", links.file_groups())

    # 2. upsert: updates and inserts in one commit
    r = table.upsert(_frame(spark, trips.upsert_batch()), WRITE_OPTIONS)
    assert r.instant is not None
    report.instants["upsert"] = upsert = r.instant
    report.counts["upsert"] = table.read().count()
    p.step(f"2. Upsert: {r.updates} trips updated (a {trips.TIP} tip each), {r.inserts} new trips in "
           f"{trips.NEW_CITY}")
    p.line(f"commit {upsert}: the index found the updated keys' file groups; each group touched got a new "
           f"version (copy-on-write), {r.files_written} file(s) written; the table has {report.counts['upsert']} trips")
    p.see("the commit (per-partition and per-file stats)", links.commit(upsert))
    p.see("the new partition's file groups", links.file_groups(trips.NEW_CITY))

    # 3. delete
    keys = spark.createDataFrame(trips.delete_keys(), trips.KEY_SCHEMA)
    r = table.delete(keys, WRITE_OPTIONS)
    assert r.instant is not None
    report.instants["delete"] = delete = r.instant
    report.counts["delete"] = table.read().count()
    p.step(f"3. Delete: {r.deletes} cancelled trips removed ({', '.join(k for k, _ in trips.delete_keys())})")
    p.line(f"commit {delete}: the table has {report.counts['delete']} trips")
    p.see("the commit", links.commit(delete))

    # 4. incremental pull
    inc = table.read_incremental(load)
    report.counts["incremental"] = inc.count()
    per_commit = {r["_hoodie_commit_time"]: r["count"] for r in inc.groupBy("_hoodie_commit_time").count().collect()}
    p.step(f"4. Incremental pull since {load}: {report.counts['incremental']} trips changed after the load")
    p.line(f"by commit: {dict(sorted(per_commit.items()))} (deleted trips are simply absent); a downstream job "
           "keeps the last instant it read and asks for what came after")
    p.see("the timeline", links.timeline())

    # 5. time travel
    now_fares, then_fares = _fares(table.read(), watched), _fares(table.read(as_of=load), watched)
    report.counts["as_of_load"] = table.read(as_of=load).count()
    p.step(f"5. Time travel: the table as of {load} has {report.counts['as_of_load']} trips")
    for tid in watched:
        p.line(f"{tid}: fare then {_fmt(then_fares.get(tid))}, now {_fmt(now_fares.get(tid))}")
    p.see("the load commit", links.commit(load))

    # 6. a bad batch, rolled back
    r = table.upsert(_frame(spark, trips.bad_batch()), WRITE_OPTIONS)
    assert r.instant is not None
    report.instants["bad"] = bad = r.instant
    negative = table.read().where(F.col("fare") < 0).count()
    report.counts["negative_fares"] = negative
    p.step(f"6. A bad batch: commit {bad} wrote {r.updates} trips with negative fares")
    p.line(f"a check after the write finds {negative} negative fares: roll the commit back")
    rollback = table.maintenance.rollback(bad)
    report.rolled_back = rollback.target
    assert rollback.instant is not None
    report.instants["rollback"] = rollback.instant
    report.counts["after_rollback"] = table.read().count()
    report.counts["negative_after_rollback"] = table.read().where(F.col("fare") < 0).count()
    p.line(f"rollback {rollback.instant} undid {rollback.target}: deleted {len(rollback.deleted)} file(s); "
           f"{report.counts['after_rollback']} trips, {report.counts['negative_after_rollback']} negative fares")
    p.see("the rollback", links.commit(rollback.instant))
    p.see("the timeline (the bad commit is gone)", links.timeline())

    # 7. clean
    maintenance = Maintenance(table.meta, CLEAN_OPTIONS)
    cleaned = maintenance.clean()
    report.cleaned_files = sorted(cleaned.deleted) if cleaned is not None else []
    if cleaned is not None and cleaned.instant is not None:
        report.instants["clean"] = cleaned.instant
    p.step(f"7. Clean: kept each file group's latest version, deleted {len(report.cleaned_files)} older file(s)")
    report.counts["as_of_load_after_clean"] = table.read(as_of=load).count()
    p.line("old versions are what time travel and incremental pulls read: cleaning trades history for storage; "
           f"the table as of {load} now reads {report.counts['as_of_load_after_clean']} trips "
           f"({report.counts['as_of_load']} before the clean)")
    if cleaned is not None and cleaned.instant is not None:
        p.see("the clean", links.commit(cleaned.instant))
    p.see("file groups (one slice each now)", links.file_groups())
    out("")
    out(f"done: {table.path}. The console: {links.overview()} (`make run` serves it on the embedded defaults); "
        f"the command line: hoodie commits {table.path}")
    return report


def _fmt(fare: float | None) -> str:
    return "(none)" if fare is None else f"{fare:.2f}"
