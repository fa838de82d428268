"""Compaction plans (merge-on-read): `C.compaction.requested` holds an Avro `HoodieCompactionPlan`.

As Apache Hudi writes it (`CompactionUtils.buildFromFileSlices`, plan version 2): one operation per
file slice to compact, naming the slice's base instant, base file name (null for a log-only
slice), log file names, file id and partition, plus size metrics. `C.compaction.inflight` holds
the same bytes; a completed compaction is `C.commit` (`compacted: true`, operation `COMPACT`).

While C is pending, writers append to a new slice of each planned group (log files with base
instant C), and readers merge that slice with the planned one (`FileGroup.merged_slice`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.data.file_names import join_path
from engine.errors import CorruptTableError
from engine.storage.base import Storage
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

PLAN_MODEL = "HoodieCompactionPlan"
PLAN_VERSION = 2  # CompactionUtils.LATEST_COMPACTION_METADATA_VERSION


class TableFiles(Protocol):
    """What reading a plan needs of a table (a `MetaClient` is one; `MetaClient` itself reads
    pending plans to build its file-system view, so this module does not import it)."""

    storage: Storage

    def instant_path(self, instant: Instant) -> str: ...


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact into a new base file at the compaction instant."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str | None  # the slice's base file name (None: a log-only slice)
    log_files: tuple[str, ...]  # the slice's log file names, in reading order
    metrics: Mapping[str, float]

    @property
    def base_path(self) -> str | None:
        return join_path(self.partition, self.base_file) if self.base_file else None

    @property
    def log_paths(self) -> tuple[str, ...]:
        return tuple(join_path(self.partition, n) for n in self.log_files)

    def to_record(self) -> dict:
        return {
            "baseInstantTime": self.base_instant,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.base_file,
            "fileId": self.file_id,
            "partitionPath": self.partition,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": None,
        }

    @classmethod
    def from_record(cls, record: Mapping) -> CompactionOperation:
        def name(value: str | None) -> str | None:
            return value.rstrip("/").rpartition("/")[2] if value else None  # version 1 plans held paths

        logs = tuple(n for n in (name(p) for p in record.get("deltaFilePaths") or []) if n)
        fid = record.get("fileId")
        base_instant = record.get("baseInstantTime")
        if not fid or not base_instant:
            raise CorruptTableError(f"compaction operation without a file id or base instant: {dict(record)}")
        return cls(
            record.get("partitionPath") or "",
            fid,
            base_instant,
            name(record.get("dataFilePath")),
            logs,
            dict(record.get("metrics") or {}),
        )


@dataclass(frozen=True)
class CompactionPlan:
    """The file slices a compaction merges (`instant`: the compaction's own time)."""

    instant: str
    operations: tuple[CompactionOperation, ...]
    extra: Mapping[str, str] | None = None

    @property
    def groups(self) -> frozenset[tuple[str, str]]:
        return frozenset((op.partition, op.file_id) for op in self.operations)

    def to_record(self) -> dict:
        return {
            "operations": [op.to_record() for op in self.operations],
            "extraMetadata": dict(self.extra) if self.extra else None,
            "version": PLAN_VERSION,
            "strategy": None,
            "preserveHoodieMetadata": True,
        }

    @classmethod
    def from_record(cls, record: Mapping, instant: str) -> CompactionPlan:
        ops = tuple(CompactionOperation.from_record(r) for r in record.get("operations") or [])
        return cls(instant, ops, record.get("extraMetadata") or None)

    def to_dict(self) -> dict:
        """The plan as JSON data (CLI `--json`, the console)."""
        return {
            "instant": self.instant,
            "operations": [
                {
                    "partition": op.partition,
                    "file_id": op.file_id,
                    "base_instant": op.base_instant,
                    "base_file": op.base_file,
                    "log_files": list(op.log_files),
                    "metrics": dict(op.metrics),
                }
                for op in self.operations
            ],
        }


def read_plan(meta: TableFiles, instant: str) -> CompactionPlan:
    """The plan of compaction `instant` (from its requested file)."""
    from engine.timeline import avro_models

    requested = Instant(instant, Action.COMPACTION, State.REQUESTED)
    data = meta.storage.read_bytes(meta.instant_path(requested))
    try:
        return CompactionPlan.from_record(avro_models.deserialize(PLAN_MODEL, data), instant)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.storage.uri(meta.instant_path(requested))}: {exc}") from exc


def pending_compactions(meta: TableFiles, timeline: Timeline) -> list[CompactionPlan]:
    """The table's pending compaction plans (requested or inflight), oldest first."""
    out = []
    for inst in timeline.pending.instants:
        if inst.action is not Action.COMPACTION:
            continue
        try:
            out.append(read_plan(meta, inst.time))
        except FileNotFoundError:
            continue  # an inflight file without its plan: nothing planned
    return out


def pending_groups(plans: Sequence[CompactionPlan]) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending compaction planned on the group."""
    return {g: plan.instant for plan in plans for g in plan.groups}


__all__ = [
    "PLAN_MODEL",
    "CompactionOperation",
    "CompactionPlan",
    "pending_compactions",
    "pending_groups",
    "read_plan",
]
