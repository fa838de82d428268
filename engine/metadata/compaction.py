"""The metadata table's own compaction: its files partition merged into a new base HFile every
`MAX_DELTA_COMMITS` deltacommits (Apache Hudi's `hoodie.metadata.compact.max.delta.commits`,
default 10), so that reading it stays a base file and a few log files however many writes there
were.

As Apache Hudi's metadata writer compacts (its `performTableServices`, before a deltacommit):

- under the data table's lock, at a new instant C after every instant of both timelines;
- `C.compaction.requested` (and `.inflight`, the same bytes) holds the plan: one operation naming
  the slice's base file and its log files (`engine.table.compaction_plan`);
- the base file `files/files-0000-0_0-0-0_C.hfile`: every record of the slice merged
  (`engine.metadata.records`; blocks of instants that are not valid are left out, and with the
  slice below it nothing older remains for a tombstone to hide, so tombstones go), keyed and
  sorted, GZ, the file info Hudi writes (`schema`, `bloomFilterTypeCode`, `minRecordKey`,
  `maxRecordKey`) and its bloom filter of the keys (DYNAMIC_V0, 10,000 entries, fpp 1e-9) as the
  `bloomFilter` meta block;
- the completed `C.commit` (operation COMPACT). The deltacommit that follows completes after C
  and so reads on top of the new base (completion-time slicing).

A crash before the commit leaves a pending compaction readers ignore (its base file's instant is
not completed); the next compaction removes it first. After a compaction the slices older than the
one before it are deleted (`clean`): readers read the latest slice only.
"""

from __future__ import annotations

from datetime import UTC, datetime

from engine.metadata import hfiles
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader
from engine.table import lifecycle
from engine.table.compaction_plan import PLAN_MODEL, PLAN_VERSION, CompactionOperation
from engine.table.meta_client import MetaClient
from engine.timeline import avro_models
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State, next_instant_time

MAX_DELTA_COMMITS = 10
BASE_TOKEN = "0-0-0"


def deltacommits_since_compaction(mdt: MetaClient) -> int:
    """Deltacommits completed after the latest compaction completed (or the initialization)."""
    completed = mdt.timeline().completed.instants

    def done(i: Instant) -> str:  # a deltacommit begun before a compaction may complete after it
        return i.completion_time or i.time

    last = max((done(i) for i in completed if i.action is Action.COMMIT), default="")
    return sum(1 for i in completed if i.action is Action.DELTA_COMMIT and done(i) > last
               and not i.time.startswith("00000000000000"))


def remove_pending(mdt: MetaClient) -> None:
    """Compactions of the metadata table left pending by a crash: base file, then timeline files."""
    for inst in mdt.timeline().pending.instants:
        if inst.action is not Action.COMPACTION:
            continue
        for info in mdt.storage.list_dir(mdr.FILES):
            if info.name.endswith(f"_{inst.time}.hfile"):
                mdt.storage.delete(info.path)
        for state in (State.INFLIGHT, State.REQUESTED):
            path = mdt.instant_path(Instant(inst.time, Action.COMPACTION, state))
            if mdt.storage.exists(path):
                mdt.storage.delete(path)


def _compacted(record: mdr.Record) -> mdr.Record:
    """A record as the base file holds it: nothing below the base, so no tombstone is needed."""
    out = dict(record)
    if record.get("type") in (mdr.TYPE_PARTITION_LIST, mdr.TYPE_FILE_LIST):
        infos = record.get("filesystemMetadata") or {}
        out["filesystemMetadata"] = {n: i for n, i in infos.items() if not i.get("isDeleted")}
    return out


def compact(reader: MetadataTableReader, schema_json: str, now: datetime | None = None) -> str | None:
    """Compact the files partition of the metadata table `reader` reads; returns the instant (None:
    nothing to compact)."""
    mdt = reader.meta
    remove_pending(mdt)
    slices = reader.slices(mdr.FILES)
    if len(slices) != 1 or not slices[0].logs:
        return None
    (sl,) = slices
    last = max(filter(None, [reader.timeline.last_time, mdt.timeline().last_time]))
    time = next_instant_time(now or datetime.now(UTC), last)
    records = reader.records(mdr.FILES)
    file_id = sl.file_id
    base_name = f"{file_id}_{BASE_TOKEN}_{time}.hfile"
    base_instant = sl.base.rsplit("_", 1)[-1].removesuffix(".hfile") if sl.base else time
    operation = CompactionOperation(
        mdr.FILES, file_id, base_instant, sl.base.rsplit("/", 1)[-1] if sl.base else None,
        tuple(p.rsplit("/", 1)[-1] for p in sl.logs), {"TOTAL_LOG_FILES": float(len(sl.logs))},
    )
    plan = {"operations": [operation.to_record()], "extraMetadata": None, "version": PLAN_VERSION,
            "strategy": None, "preserveHoodieMetadata": None}
    body = avro_models.serialize(PLAN_MODEL, plan)
    requested = Instant(time, Action.COMPACTION, State.REQUESTED)
    mdt.storage.create_exclusive(mdt.instant_path(requested), body)
    lifecycle.ensure_file(mdt, requested.with_state(State.INFLIGHT), body)

    data, count = hfiles.base_file([_compacted(r) for r in records.values()], schema_json, base_name)
    path = f"{mdr.FILES}/{base_name}"
    mdt.storage.create_exclusive(path, data)
    stat = WriteStat(
        fileId=file_id, path=path, partitionPath=mdr.FILES, prevCommit=base_instant, numWrites=count,
        numInserts=0, numUpdateWrites=count, totalWriteBytes=len(data), fileSizeInBytes=len(data),
        totalLogFilesCompacted=len(sl.logs), totalLogSizeCompacted=sum(mdt.storage.size(p) for p in sl.logs),
        totalLogRecords=count,
    )
    metadata = CommitMetadata({mdr.FILES: [stat]}, "COMPACT", compacted=True)
    lifecycle.complete_instant(mdt, time, Action.COMMIT, mdt.encode_commit_metadata(metadata))
    clean(mdt, file_id)
    return time


def clean(mdt: MetaClient, file_id: str) -> list[str]:
    """Delete the file slices of the files partition older than the one before the latest (no
    reader reads them: readers read the latest slice; the one before stays for a reader that
    began before the latest compaction). Log files whose deltacommit is not a completed instant
    of the metadata table are left alone. Returns the paths deleted."""
    timeline = mdt.timeline()
    completed = timeline.completed
    done = completed.completion_times
    bases = sorted(
        (info.name.rsplit("_", 1)[-1].removesuffix(".hfile"), info.path)
        for info in mdt.storage.list_dir(mdr.FILES)
        if info.name.startswith(f"{file_id}_") and info.name.endswith(".hfile")
        and (info.name.rsplit("_", 1)[-1].removesuffix(".hfile") in completed.completed_times
             or info.name.rsplit("_", 1)[-1].startswith("00000000000000"))
    )
    if len(bases) < 3:
        return []
    keep_from = bases[-2][0]  # the slice before the latest begins here
    deleted = [path for instant, path in bases if instant < keep_from]
    for info in mdt.storage.list_dir(mdr.FILES):
        if not (info.name.startswith(f".{file_id}_") and ".log." in info.name):
            continue
        instant = info.name[len(file_id) + 2:].split(".log.", 1)[0]
        finished = done.get(instant) or (instant if instant.startswith("00000000000000") else None)
        if finished is not None and finished < keep_from:
            deleted.append(info.path)
    for path in deleted:
        mdt.storage.delete(path)
    return deleted


__all__ = ["MAX_DELTA_COMMITS", "clean", "compact", "deltacommits_since_compaction", "remove_pending"]
