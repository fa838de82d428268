"""Clean: delete file versions no reader needs any more, planned first, recorded as clean instants.

Policies (Apache Hudi's):
- KEEP_LATEST_COMMITS (N): every snapshot of the last N completed commits stays readable (time
  travel and incremental reads whose range ends within them). The earliest retained commit E is
  the N-th newest; a slice is deleted only when a newer slice of its file group is at or before
  E (so no snapshot at or after E uses it).
- KEEP_LATEST_FILE_VERSIONS (N): the newest N slices of every file group stay.
Never deleted: the latest slice of any file group, and any base file a savepoint protects.
File groups a completed replacecommit (insert_overwrite, clustering) replaced are deleted whole,
as Apache Hudi's cleaner does: any of them (KEEP_LATEST_FILE_VERSIONS), or those replaced before
the earliest retained commit (KEEP_LATEST_COMMITS).

Timeline: `C.clean.requested` (Avro `HoodieCleanerPlan`), `C.clean.inflight` (the same plan),
the deletions, then `C.clean` (Avro `HoodieCleanMetadata`). Deleting an already-deleted file is a
no-op, so a crashed clean is finished by re-running its plan (`repair`). Only old slices are
ever deleted, so readers of the latest snapshot never notice a clean, finished or not.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from engine import failpoints
from engine.data.file_group import FileGroup
from engine.serial import Documented
from engine.services.savepoint import savepointed_files
from engine.table.fs_view import DataFile
from engine.table.lifecycle import claim_instant, ensure_file, read_avro, write_avro
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.table.retention import CLEAN_METADATA_MODEL
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
PLAN_MODEL = "HoodieCleanerPlan"
METADATA_MODEL = CLEAN_METADATA_MODEL


@dataclass(frozen=True)
class CleanPlan(Documented):
    """Files to delete per partition (relative paths); `instant` is the clean's own time."""

    policy: str
    retained: int
    earliest_retained: str | None  # KEEP_LATEST_COMMITS: the oldest commit whose snapshot stays
    last_completed: str | None
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    instant: str | None = None
    # files the planner found but that are not this table's (engine.table.ownership): kept
    skipped: tuple[str, ...] = ()

    @property
    def all_files(self) -> list[str]:
        return sorted(f for fs in self.files.values() for f in fs)

    def to_record(self, base_uri: str) -> dict:
        earliest = (
            {"timestamp": self.earliest_retained, "action": Action.COMMIT.value, "state": "COMPLETED"}
            if self.earliest_retained
            else None
        )
        return {
            "earliestInstantToRetain": earliest,
            "lastCompletedCommitTimestamp": self.last_completed or "",
            "policy": self.policy,
            "filesToBeDeletedPerPartition": {},
            "version": 2,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f"{base_uri.rstrip('/')}/{f}", "isBootstrapBaseFile": False} for f in fs]
                for p, fs in sorted(self.files.items())
            },
            "partitionsToBeDeleted": [],
        }

    @classmethod
    def from_record(cls, record: dict, instant: str) -> CleanPlan:
        files: dict[str, tuple[str, ...]] = {}
        for part, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items():
            names = [i["filePath"].rstrip("/").rpartition("/")[2] for i in infos]
            files[part] = tuple(sorted(f"{part}/{n}" if part else n for n in names))
        earliest = record.get("earliestInstantToRetain")
        return cls(
            record.get("policy") or KEEP_LATEST_COMMITS,
            0,
            earliest["timestamp"] if earliest else None,
            record.get("lastCompletedCommitTimestamp") or None,
            files,
            instant,
        )


@dataclass
class CleanResult(Documented):
    instant: str | None
    deleted: list[str]
    earliest_retained: str | None
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # planned, but not this table's: kept


# ---- the pure planner -------------------------------------------------------------------------
def files_to_clean(
    groups: Iterable[FileGroup],
    completed_writes: Sequence[str],
    policy: str,
    retained: int,
    protected: frozenset[str] = frozenset(),
    pending_compaction: Mapping[tuple[str, str], str] | None = None,
) -> tuple[str | None, dict[str, list[str]]]:
    """(earliest retained commit, partition -> files to delete) for the visible file groups.

    `completed_writes`: completed write instant times, ascending. `protected`: savepointed paths
    (a slice with a protected file is kept whole: its base file and its log files). Slices are
    cleaned whole (merge-on-read: base file and log files). `pending_compaction`: groups a pending
    compaction planned: the slice it compacts stays, and the slice it started does not count.
    """
    pending = pending_compaction or {}
    earliest: str | None = None
    if policy == KEEP_LATEST_COMMITS:
        if len(completed_writes) <= retained:
            return None, {}
        earliest = completed_writes[-retained]
    out: dict[str, list[str]] = {}
    for g in groups:
        slices = list(g.slices)  # oldest first
        started = pending.get((g.partition, g.file_id))
        if started is not None and slices and slices[-1].base_instant == started:
            slices = slices[:-1]  # the compaction's slice: the one it compacts is the latest
        doomed = []
        if policy == KEEP_LATEST_COMMITS:
            assert earliest is not None
            for older, newer in zip(slices, slices[1:], strict=False):
                if newer.base_instant <= earliest:
                    doomed.append(older)
        else:
            doomed = slices[:-retained] if len(slices) > retained else []
        for s in doomed:
            if any(f in protected for f in s.files):
                continue
            out.setdefault(g.partition, []).extend(s.files)
    return earliest, {p: sorted(fs) for p, fs in sorted(out.items())}


def replaced_files_to_clean(
    replaced: Iterable[tuple[FileGroup, str]],
    policy: str,
    earliest: str | None,
    protected: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """partition -> files of replaced file groups to delete, as Apache Hudi's cleaner picks them
    (`getReplacedFilesEligibleToClean`): every replaced group (KEEP_LATEST_FILE_VERSIONS), or
    those whose replacecommit is older than the earliest retained commit (KEEP_LATEST_COMMITS: no
    retained snapshot reads them). `replaced`: (group with all its slices, replacing instant).
    A group with a savepointed file is kept whole."""
    out: dict[str, list[str]] = {}
    for g, by in replaced:
        if policy == KEEP_LATEST_COMMITS and (earliest is None or by >= earliest):
            continue
        files = [f for sl in g.slices for f in sl.files]
        if any(f in protected for f in files):
            continue
        out.setdefault(g.partition, []).extend(files)
    return out


# ---- planning / execution ---------------------------------------------------------------------
def _replaced_groups(meta: MetaClient, timeline: Timeline, listed: list[DataFile]) -> list[tuple[FileGroup, str]]:
    """Every file group a completed replacecommit replaced, with all its visible slices, and the
    replacing instant."""
    from engine.table.fs_view import FileSystemView

    by: dict[tuple[str, str], str] = {}
    for inst in timeline.completed.instants:
        if inst.action is Action.REPLACE_COMMIT:
            for p, ids in (meta.commit_metadata(inst).partition_to_replace_file_ids or {}).items():
                for f in ids:
                    by.setdefault((p, f), inst.time)
    if not by:
        return []
    unhidden = FileSystemView.build(listed, timeline)
    return [(g, by[(g.partition, g.file_id)]) for g in unhidden.groups if (g.partition, g.file_id) in by]


def _with_cdc_logs(meta: MetaClient, files: dict[str, list[str]], listed: list[DataFile]) -> dict[str, list[str]]:
    """`files` with the CDC log files of the cleaned base files: a CDC log file belongs to the
    slice its write started (named with the same file id and instant), as in Apache Hudi's file
    slices, and goes with it."""
    if not files or meta.config.cdc_mode is None:
        return dict(sorted(files.items()))
    from engine.data.file_names import parse_base_file_name, parse_cdc_log_file_name

    logs: dict[tuple[str, str, str], list[str]] = {}
    for df in listed:
        name = parse_cdc_log_file_name(df.name)
        if name is not None:
            logs.setdefault((df.partition, name.file_id, name.base_instant), []).append(df.path)
    out = {}
    for p, fs in files.items():
        extra = [c for f in fs if (b := parse_base_file_name(f.rpartition("/")[2])) is not None
                 for c in logs.get((p, b.file_id, b.instant), [])]
        out[p] = sorted({*fs, *extra})
    return dict(sorted(out.items()))


def plan_clean(meta: MetaClient, timeline: Timeline, policy: str, retained: int) -> CleanPlan:
    listed = meta.list_data_files()  # once: the view, the replaced groups and the CDC logs
    view = meta.file_system_view(timeline, files=listed)
    writes = [i.time for i in timeline.completed_writes.instants]
    protected = savepointed_files(meta, timeline)
    earliest, files = files_to_clean(view.groups, writes, policy, retained, protected, view.pending_compaction)
    for p, fs in replaced_files_to_clean(_replaced_groups(meta, timeline, listed), policy, earliest, protected).items():
        files[p] = sorted({*files.get(p, []), *fs})
    files = _with_cdc_logs(meta, files, listed)
    ownership = FileOwnership(meta.storage)
    kept = {p: tuple(ownership.owned(fs, "clean")) for p, fs in files.items()}
    return CleanPlan(
        policy,
        retained,
        earliest,
        writes[-1] if writes else None,
        {p: fs for p, fs in kept.items() if fs},
        skipped=tuple(ownership.skipped_paths),
    )


def schedule_clean(meta: MetaClient, timeline: Timeline, plan: CleanPlan, now: datetime | None = None) -> CleanPlan:
    from engine.timeline import avro_models

    body = avro_models.serialize(PLAN_MODEL, plan.to_record(meta.storage.base_uri))
    time = claim_instant(meta, timeline, Action.CLEAN, body, now)
    return CleanPlan(plan.policy, plan.retained, plan.earliest_retained, plan.last_completed, plan.files, time,
                     plan.skipped)


def execute_clean(meta: MetaClient, plan: CleanPlan, fence: Callable[[], None] | None = None) -> CleanResult:
    assert plan.instant is not None, "schedule the plan first"
    started = _time.monotonic()
    if fence is not None:
        fence()
    requested = Instant(plan.instant, Action.CLEAN, State.REQUESTED)
    inflight = requested.with_state(State.INFLIGHT)
    ensure_file(meta, inflight, meta.read_instant(requested))
    deleted: dict[str, list[str]] = {}
    first = True
    # a plan may come from another writer (or be resumed): delete only what is this table's
    ownership = FileOwnership(meta.storage)
    foreign = set(ownership.skipped_paths)
    for part, files in sorted(plan.files.items()):
        owned = set(ownership.owned(files, "clean"))
        foreign |= set(files) - owned
        for rel in files:
            if rel in owned and meta.storage.exists(rel):
                meta.storage.delete(rel)
                deleted.setdefault(part, []).append(rel)
                if first:
                    first = False
                    failpoints.hit("clean.file_deleted")
    record = {
        "startCleanTime": plan.instant,
        "timeTakenInMillis": int((_time.monotonic() - started) * 1000),
        "totalFilesDeleted": sum(
            1 for fs in plan.files.values() for f in fs if f not in foreign and not meta.storage.exists(f)
        ),
        "earliestCommitToRetain": plan.earliest_retained or "",
        "lastCompletedCommitTimestamp": plan.last_completed or "",
        "partitionMetadata": {
            p: {
                "partitionPath": p,
                "policy": plan.policy,
                "deletePathPatterns": [f.rpartition("/")[2] for f in files],
                # after a resumed run, files an earlier run deleted count as deleted too
                "successDeleteFiles": [
                    f.rpartition("/")[2] for f in files if f not in foreign and not meta.storage.exists(f)
                ],
                "failedDeleteFiles": [f.rpartition("/")[2] for f in files if f in foreign],
                "isPartitionDeleted": False,
            }
            for p, files in sorted(plan.files.items())
        },
        "version": 2,
        "bootstrapPartitionMetadata": {},
    }
    if fence is not None:
        fence()
    write_avro(meta, requested.with_state(State.COMPLETED), METADATA_MODEL, record)
    return CleanResult(plan.instant, sorted(f for fs in deleted.values() for f in fs), plan.earliest_retained,
                       round(_time.monotonic() - started, 3), sorted(foreign | set(plan.skipped)))


def resume(meta: MetaClient, instant: Instant, fence: Callable[[], None] | None = None) -> CleanResult:
    record = read_avro(meta, instant.with_state(State.REQUESTED), PLAN_MODEL)
    return execute_clean(meta, CleanPlan.from_record(record, instant.time), fence)


def clean(
    meta: MetaClient,
    policy: str,
    retained: int,
    dry_run: bool = False,
    now: datetime | None = None,
    fence: Callable[[], None] | None = None,
) -> CleanResult | CleanPlan | None:
    """Plan and run a clean (the caller holds the table lock). None when there is nothing to clean;
    the plan alone in a dry run."""
    timeline = meta.timeline()
    plan = plan_clean(meta, timeline, policy, retained)
    if dry_run:
        return plan
    if not plan.files:
        return None
    plan = schedule_clean(meta, timeline, plan, now)
    return execute_clean(meta, plan, fence)