"""The metadata table's own compaction: every `MAX_DELTA_COMMITS` deltacommits (Apache Hudi's
`hoodie.metadata.compact.max.delta.commits`, default 10) each file group with log files (of
`files` and, where it is kept, `record_index`; all at one instant, as Hudi compacts every
partition together) is merged into a new base HFile, so that reading it stays a base file and a
few log files however many writes there were.

As Apache Hudi's metadata writer compacts (its `performTableServices`, before a deltacommit):

- under the data table's lock, at a new instant C after every instant of both timelines;
- `C.compaction.requested` (and `.inflight`, the same bytes) holds the plan: one operation naming
  the slice's base file and its log files (`engine.table.compaction_plan`);
- per slice, the base file `<partition>/<file id>_0-0-0_C.hfile` (`files/files-0000-0_0-0-0_C.hfile`,
  `record_index/record-index-0003-0_0-0-0_C.hfile`): every record of the slice merged
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

import contextvars
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from engine import failpoints
from engine.errors import CorruptTableError, StorageError
from engine.metadata import hfiles
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader
from engine.table import lifecycle
from engine.table.compaction_plan import PLAN_MODEL, PLAN_VERSION, CompactionOperation
from engine.table.meta_client import MetaClient
from engine.timeline import avro_models
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State, next_instant_time

MAX_DELTA_COMMITS = 10  # hoodie.metadata.compact.max.delta.commits's default
_CONFIGURED: contextvars.ContextVar[int | None] = contextvars.ContextVar("metadata_max_delta_commits", default=None)


def max_delta_commits() -> int:
    """The deltacommits after which the metadata table is compacted: the writer's
    hoodie.metadata.compact.max.delta.commits (`configure`), else MAX_DELTA_COMMITS."""
    value = _CONFIGURED.get()
    return value if value is not None else MAX_DELTA_COMMITS


def configure(value: int | None) -> contextvars.Token:
    """Set the writer's hoodie.metadata.compact.max.delta.commits for this context (reset with the token)."""
    return _CONFIGURED.set(value)


def reset(token: contextvars.Token) -> None:
    _CONFIGURED.reset(token)


BASE_TOKEN = "0-0-0"


def deltacommits_since_compaction(mdt: MetaClient) -> int:
    """Deltacommits completed after the latest compaction completed (or the initialization)."""
    completed = mdt.timeline().completed.instants

    def done(i: Instant) -> str:  # a deltacommit begun before a compaction may complete after it
        return i.completion_time or i.time

    last = max((done(i) for i in completed if i.action is Action.COMMIT), default="")
    return sum(1 for i in completed if i.action is Action.DELTA_COMMIT and done(i) > last
               and not i.time.startswith("00000000000000"))


def remove_pending(mdt: MetaClient, partitions: Iterable[str] = (mdr.FILES,)) -> None:
    """Compactions of the metadata table left pending by a crash: base files, then timeline files."""
    for inst in mdt.timeline().pending.instants:
        if inst.action is not Action.COMPACTION:
            continue
        for partition in partitions:
            for info in mdt.storage.list_dir(partition):
                if info.name.endswith(f"_{inst.time}.hfile"):
                    mdt.storage.delete(info.path)
        for state in (State.INFLIGHT, State.REQUESTED):
            path = mdt.instant_path(Instant(inst.time, Action.COMPACTION, state))
            if mdt.storage.exists(path):
                mdt.storage.delete(path)


def _compacted(record: mdr.Record) -> mdr.Record:
    """A record as the base file holds it: nothing below the base, so no tombstone is needed (the
    record itself where it holds none: the indexes' records are written as read)."""
    if record.get("type") not in (mdr.TYPE_PARTITION_LIST, mdr.TYPE_FILE_LIST):
        return record
    out = dict(record)
    infos = record.get("filesystemMetadata") or {}
    out["filesystemMetadata"] = {n: i for n, i in infos.items() if not i.get("isDeleted")}
    return out


def compact(reader: MetadataTableReader, schemas: Mapping[str, str] | str, now: datetime | None = None,
            partitions: Iterable[str] = (mdr.FILES,)) -> str | None:
    """Compact the file groups with log files of the metadata table `reader` reads, in the
    partitions named (all at one instant, as Hudi compacts its metadata table); returns the instant
    (None: nothing to compact)."""
    mdt = reader.meta
    partitions = list(partitions)
    remove_pending(mdt, partitions)
    todo = [sl for p in partitions for sl in reader.slices(p) if sl.logs]
    if not todo:
        return None
    last = max(filter(None, [reader.timeline.last_time, mdt.timeline().last_time]))
    time = next_instant_time(now or datetime.now(UTC), last)
    operations = []
    for sl in todo:
        base_instant = sl.base.rsplit("_", 1)[-1].removesuffix(".hfile") if sl.base else time
        operations.append(CompactionOperation(
            sl.partition, sl.file_id, base_instant, sl.base.rsplit("/", 1)[-1] if sl.base else None,
            tuple(p.rsplit("/", 1)[-1] for p in sl.logs), {"TOTAL_LOG_FILES": float(len(sl.logs))},
        ))
    plan = {"operations": [op.to_record() for op in operations], "extraMetadata": None, "version": PLAN_VERSION,
            "strategy": None, "preserveHoodieMetadata": None}
    body = avro_models.serialize(PLAN_MODEL, plan)
    requested = Instant(time, Action.COMPACTION, State.REQUESTED)
    mdt.storage.create_exclusive(mdt.instant_path(requested), body)
    lifecycle.ensure_file(mdt, requested.with_state(State.INFLIGHT), body)

    stats: dict[str, list[WriteStat]] = {}
    for sl, op in zip(todo, operations, strict=True):
        records = reader.records(sl.partition, file_ids=[sl.file_id])
        base_name = f"{sl.file_id}_{BASE_TOKEN}_{time}.hfile"
        schema_json = schemas if isinstance(schemas, str) else schemas[sl.partition]
        data, count = hfiles.base_file([_compacted(r) for r in records.values()], schema_json, base_name)
        path = f"{sl.partition}/{base_name}"
        mdt.storage.create_exclusive(path, data)
        failpoints.hit("metadata.compaction.written")
        stats.setdefault(sl.partition, []).append(WriteStat(
            fileId=sl.file_id, path=path, partitionPath=sl.partition, prevCommit=op.base_instant, numWrites=count,
            numInserts=0, numUpdateWrites=count, totalWriteBytes=len(data), fileSizeInBytes=len(data),
            totalLogFilesCompacted=len(sl.logs), totalLogSizeCompacted=sum(mdt.storage.size(p) for p in sl.logs),
            totalLogRecords=count,
        ))
    metadata = CommitMetadata(stats, "COMPACT", compacted=True)
    lifecycle.complete_instant(mdt, time, Action.COMMIT, mdt.encode_commit_metadata(metadata))
    failpoints.hit("metadata.compaction.completed")
    for partition in partitions:
        clean(mdt, [sl.file_id for sl in todo if sl.partition == partition], partition)
    return time


def clean(mdt: MetaClient, file_ids: Iterable[str], partition: str = mdr.FILES) -> list[str]:
    """Delete the file slices of file groups `file_ids` of a metadata partition older than the one
    before the latest (no reader reads them: readers read the latest slice; the one before stays
    for a reader that began before the latest compaction). Log files whose deltacommit is not a
    completed instant of the metadata table are left alone. One listing of the partition and one
    of the timeline. Returns the paths deleted."""
    completed = mdt.timeline().completed
    done = completed.completion_times
    finished_times = completed.completed_times
    wanted = set(file_ids)
    infos = mdt.storage.list_dir(partition)
    bases: dict[str, list[tuple[str, str]]] = {}
    logs: dict[str, list[tuple[str, str]]] = {}
    for info in infos:
        name = info.name
        if name.endswith(".hfile"):
            file_id, instant = name.split("_", 1)[0], name.rsplit("_", 1)[-1].removesuffix(".hfile")
            if file_id in wanted and (instant in finished_times or instant.startswith("00000000000000")):
                bases.setdefault(file_id, []).append((instant, info.path))
        elif name.startswith(".") and ".log." in name:
            file_id, _, rest = name[1:].partition("_")
            if file_id in wanted:
                logs.setdefault(file_id, []).append((rest.split(".log.", 1)[0], info.path))
    deleted: list[str] = []
    for file_id, found in bases.items():
        found.sort()
        if len(found) < 3:
            continue
        keep_from = found[-2][0]  # the slice before the latest begins here
        deleted += [path for instant, path in found if instant < keep_from]
        for instant, path in logs.get(file_id, []):
            finished = done.get(instant) or (instant if instant.startswith("00000000000000") else None)
            if finished is not None and finished < keep_from:
                deleted.append(path)
    for path in deleted:
        mdt.storage.delete(path)
    return deleted


def holds_deltacommit(mdt: MetaClient, time: str) -> bool:
    """Whether a completed compaction (or log compaction) of the metadata table holds the
    deltacommit at `time`: its plan names one of that deltacommit's log files (a plan that cannot
    be read: whether it completed after the deltacommit did)."""
    timeline = mdt.timeline()
    done = timeline.completed.completion_times.get(time)
    if done is None or mdt.completed_file_name(time, Action.DELTA_COMMIT) is None:
        return False
    marker = f"_{time}.log."
    for inst in timeline.completed.instants:
        if inst.time == time or inst.action not in (Action.COMMIT, Action.DELTA_COMMIT):
            continue
        for action in (Action.COMPACTION, Action.LOG_COMPACTION):
            requested = mdt.instant_path(Instant(inst.time, action, State.REQUESTED))
            if not mdt.storage.exists(requested):
                continue
            try:
                plan = avro_models.deserialize(PLAN_MODEL, mdt.storage.read_bytes(requested))
            except (CorruptTableError, StorageError, ValueError):
                if (inst.completion_time or inst.time) >= done:
                    return True
                continue
            if any(marker in name for op in plan.get("operations") or [] for name in op.get("deltaFilePaths") or []):
                return True
    return False


__all__ = ["MAX_DELTA_COMMITS", "clean", "compact", "configure", "deltacommits_since_compaction", "holds_deltacommit",
           "max_delta_commits", "remove_pending", "reset"]
