"""Reading Apache Hudi's metadata table (`.hoodie/metadata/`, a merge-on-read table of its own):
the records of a partition as of the data table's timeline, and the `files` partition as a file
listing. Tables of version 8 and 9; a version 6 table's metadata table is not read (listing
storage stays the answer there).

What is read, as Hudi's `HoodieBackedTableMetadata` reads it:

- each file group of a metadata partition (`files-0000-0`, `record-index-0003-0`, ...): its
  latest base HFile written by a completed metadata instant (a compaction's commit, or the
  initializing deltacommit), then the blocks of the log files whose deltacommit completed after
  the compaction began (a deltacommit in flight while the compaction was planned is not in the
  base), in completion order;
- a log block counts when its instant is valid (Hudi's `getValidInstantTimestamps`): a completed
  instant of the data table, a completed deltacommit of the metadata table whose instant is not
  pending on the data table, an initializing instant (`00000000000000...`), an instant that a
  completed rollback or restore of either table names; ROLLBACK command blocks drop the blocks of
  their target written before them;
- HFILE blocks hold records (`engine.metadata.records` merges them), DELETE blocks reset keys.

`MetadataTableReader.check_in_sync` says whether the metadata table accounts for every completed
write of the data table (a table another engine wrote to without updating it is behind); a
listing comes only from a metadata table in sync. Malformed files raise CorruptTableError naming
the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import fastavro

from engine.data import log_file
from engine.data.hfile import HFileReader, UnsupportedHFileError
from engine.data.hfile_block import decode_hfile_content, decode_value
from engine.data.log_block import BlockType, CommandBlockType, HeaderKey, LogBlock, decode_delete_block
from engine.errors import CorruptTableError, TableNotFoundError, UnsupportedFeatureError
from engine.metadata import records as mdr
from engine.storage import storage_for
from engine.table import metadata_table
from engine.table.lifecycle import rolled_back_instants
from engine.table.meta_client import MetaClient
from engine.table.metadata_table import FOLDER
from engine.timeline.instant import Action
from engine.timeline.timeline import Timeline

INIT_PREFIX = "00000000000000"  # SOLO_COMMIT_TIMESTAMP: the instants that initialize partitions
_BASE_RE = re.compile(r"^(?P<file_id>[A-Za-z0-9-]+)_(?P<token>[A-Za-z0-9-]+)_(?P<instant>\d{17})\.hfile$")
_LOG_RE = re.compile(r"^\.(?P<file_id>[A-Za-z0-9-]+)_(?P<instant>\d{17})\.log\.(?P<version>\d+)(?:_(?P<token>\d+-\d+-\d+))?$")
FILE_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION, Action.CLUSTERING)


def _shared(record: dict) -> bool:
    """Records whose decoding many cells share (the key is the cell's): record-index locations,
    secondary-index entries."""
    return record.get("type") in (mdr.TYPE_RECORD_INDEX, mdr.TYPE_SECONDARY_INDEX)


class MetadataTableUnavailable(Exception):  # noqa: N818 (a reason, not a failure of the caller's)
    """The metadata table cannot answer (missing, another table version, behind the data table):
    the message says why; the caller lists storage instead."""


@dataclass(frozen=True)
class MetadataSlice:
    """The latest readable slice of one file group of a metadata partition."""

    partition: str
    file_id: str
    base: str | None  # path below the metadata table
    logs: tuple[str, ...]  # in the order they are merged


@dataclass
class MetadataTableReader:
    """The metadata table of the data table `data`, read as of the data timeline `timeline`."""

    data: MetaClient
    timeline: Timeline
    meta: MetaClient = field(init=False)
    mdt_timeline: Timeline = field(init=False)
    valid: frozenset[str] = field(init=False)
    _stamps: dict[str, tuple[int, int | None]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        version = self.data.config.version
        if version < 8:
            raise MetadataTableUnavailable(f"table version {version}: the metadata table is read from version 8")
        storage = storage_for(self.data.storage.uri(FOLDER), self.data.storage.options)
        try:
            self.meta = MetaClient.open(storage)
        except TableNotFoundError as exc:
            raise MetadataTableUnavailable(f"no metadata table ({exc})") from None
        self.mdt_timeline = self.meta.timeline()
        self.valid = frozenset(self._valid_instants())

    # ---- which instants count ----------------------------------------------------------------
    def _valid_instants(self) -> set[str]:
        data_pending = {i.time for i in self.timeline.pending.instants}
        valid = set(self.timeline.completed_times)
        valid |= {
            i.time for i in self.mdt_timeline.completed.instants
            if i.action is Action.DELTA_COMMIT and i.time not in data_pending
        }
        valid |= {i.time for i in self.mdt_timeline.completed.instants if i.time.startswith(INIT_PREFIX)}
        valid |= rolled_back_instants(self.data, self.timeline)
        valid |= {
            i.time for i in self.mdt_timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], completed=True).instants
        }
        return valid

    def counts(self, instant: str | None) -> bool:
        """Whether the metadata table's records written at `instant` count: a valid instant, or
        one older than its active timeline (archived: its blocks are in compacted base files)."""
        if instant is None:
            return False
        if instant in self.valid:
            return True
        first = self.mdt_timeline.archived_before
        return first is not None and instant < first

    def partitions(self) -> list[str]:
        """The metadata partitions the data table's properties name as built."""
        return metadata_table.partitions_in(self.data.config)

    def check_in_sync(self) -> None:
        """Raise MetadataTableUnavailable unless every completed write, clean, rollback and restore
        of the data table since the metadata table began has its deltacommit there."""
        if mdr.FILES not in self.partitions():
            raise MetadataTableUnavailable("its files partition is not built")
        completed = self.mdt_timeline.completed
        if not completed.instants:
            raise MetadataTableUnavailable("it has no completed instant")
        mdt_times = {i.time for i in completed.instants}
        start = min((t for t in mdt_times if not t.startswith(INIT_PREFIX)), default=None)
        missing = [
            i.time for i in self.timeline.completed.instants
            if start is not None and i.time >= start and i.time not in mdt_times
            and i.action not in (Action.SAVEPOINT, Action.INDEXING)
        ]
        if start is None and any(True for _ in self.timeline.completed.instants):
            # only initializing instants: in sync if nothing was written after the initialization
            init_done = self.mdt_timeline.completed.instants[-1].completion_time
            later = [i.time for i in self.timeline.completed.instants
                     if init_done is not None and (i.completion_time or i.time) > init_done]
            missing = later
        if missing:
            raise MetadataTableUnavailable(
                f"it is behind the data table: no deltacommit for {', '.join(sorted(missing)[:5])}"
                + (" ..." if len(missing) > 5 else "")
            )

    # ---- file slices ---------------------------------------------------------------------------
    def slices(self, partition: str) -> list[MetadataSlice]:
        """The latest readable slice of each file group of metadata partition `partition`."""
        storage = self.meta.storage
        bases: dict[str, list[tuple[str, str]]] = {}
        logs: dict[str, list[tuple[str, int, str, str]]] = {}
        completed = self.mdt_timeline.completed_times
        for info in storage.list_dir(partition):
            self._stamps[info.path] = (info.size, info.mtime_ms)
            m = _BASE_RE.match(info.name)
            if m:
                if (m["instant"] in completed or m["instant"].startswith(INIT_PREFIX)
                        or self.mdt_timeline.is_valid_write(m["instant"])):
                    bases.setdefault(m["file_id"], []).append((m["instant"], info.path))
                continue
            m = _LOG_RE.match(info.name)
            if m:
                logs.setdefault(m["file_id"], []).append(
                    (m["instant"], int(m["version"]), m["token"] or "", info.path)
                )
        done = self.mdt_timeline.completion_times
        out = []
        for file_id in sorted(set(bases) | set(logs)):
            base = max(bases.get(file_id, []), default=None)
            since = base[0] if base else ""

            def completed_at(lf: tuple[str, int, str, str]) -> str:
                return done.get(lf[0], lf[0])

            # a log belongs to the newest slice begun at or before its deltacommit completed
            # (timeline layout 2, as in engine.table.fs_view); merged in completion order
            mine = sorted((lf for lf in logs.get(file_id, []) if completed_at(lf) >= since),
                          key=lambda lf: (completed_at(lf), lf[1], lf[2]))
            out.append(MetadataSlice(partition, file_id, base[1] if base else None, tuple(lf[3] for lf in mine)))
        return out

    def stamp(self, path: str) -> tuple[int | None, int | None]:
        """(size, modification time) of a file `slices` listed ((None, None): not listed)."""
        return self._stamps.get(path, (None, None))

    # ---- records -------------------------------------------------------------------------------
    def _base_records(self, path: str, keys: set[str] | None) -> dict[str, list[mdr.Record | None]]:
        data = self.meta.storage.read_bytes(path)
        where = self.meta.storage.uri(path)
        try:
            reader = HFileReader(data)
            cells = reader.cells() if keys is None else [
                (k, v) for k, vs in reader.lookup([k.encode() for k in keys]).items() for v in vs
            ]
            schema = fastavro.parse_schema(json.loads(reader.file_info[b"schema"]))
        except UnsupportedHFileError as exc:
            raise UnsupportedFeatureError(f"{where}: {exc}") from exc
        except (ValueError, KeyError) as exc:
            raise CorruptTableError(f"{where}: not a readable metadata HFile: {exc}") from exc
        out: dict[str, list[mdr.Record | None]] = {}
        memo: dict[bytes, dict] = {}
        for row, value in cells:
            key = row.decode("utf-8")
            try:
                record: Any = decode_value(value, schema, memo, _shared)
            except Exception as exc:
                raise CorruptTableError(f"{where}: record {key!r} does not decode: {exc}") from exc
            if isinstance(record, dict) and record.get("key") == "":
                record["key"] = key
            out.setdefault(key, []).append(record)
        return out

    def _log_blocks(self, paths: Iterable[str]) -> list[tuple[str, LogBlock]]:
        blocks: list[tuple[str, LogBlock]] = []
        for path in paths:
            for block in log_file.read_log_blocks(self.meta.storage, path):
                if block.block_type == BlockType.COMMAND:
                    if block.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == str(CommandBlockType.ROLLBACK):
                        target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
                        blocks = [(p, b) for p, b in blocks if b.instant != target]
                    continue
                if self.counts(block.instant):
                    blocks.append((path, block))
        return blocks

    def records(
        self, partition: str, keys: Iterable[str] | None = None, file_ids: Iterable[str] | None = None
    ) -> dict[str, mdr.Record]:
        """Key -> merged record of metadata partition `partition` (only `keys`, when given; only
        the file groups `file_ids`, when given)."""
        wanted = set(keys) if keys is not None else None
        wanted_bytes = {k.encode("utf-8") for k in wanted} if wanted is not None else None
        groups = set(file_ids) if file_ids is not None else None
        merged: dict[str, mdr.Record] = {}
        for sl in self.slices(partition):
            if groups is not None and sl.file_id not in groups:
                continue
            versions: dict[str, list[mdr.Record | None]] = {}
            if sl.base is not None:
                versions = self._base_records(sl.base, wanted)
            for path, block in self._log_blocks(sl.logs):
                where = f"{self.meta.storage.uri(path)}"
                if block.block_type == BlockType.HFILE_DATA:
                    try:
                        schema = fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
                    except (KeyError, ValueError) as exc:
                        raise CorruptTableError(f"{where}: HFILE block at {block.offset} without a schema") from exc
                    try:
                        found = decode_hfile_content(block.content, schema, block.offset, wanted_bytes, _shared)
                    except CorruptTableError as exc:
                        raise CorruptTableError(f"{where}: {exc}") from exc
                    for record in found:
                        key = str(record.get("key"))
                        if wanted is None or key in wanted:
                            versions.setdefault(key, []).append(record)
                elif block.block_type == BlockType.DELETE:
                    for key in decode_delete_block(block).column("key").to_pylist():
                        if wanted is None or key in wanted:
                            versions.setdefault(str(key), []).append(None)
                else:
                    raise CorruptTableError(f"{where}: a block of type {block.block_type} in a metadata log file")
            for key, vs in versions.items():
                final = mdr.merge_all(vs)
                if final is not None:
                    merged[key] = final
        return merged

    def file_listing(self, partitions: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """Data partition -> {file name: size} from the `files` partition (all partitions, or
        those named); raises MetadataTableUnavailable when the table is not in sync."""
        self.check_in_sync()
        if partitions is None:
            everything = self.records(mdr.FILES, [mdr.ALL_PARTITIONS_KEY]).get(mdr.ALL_PARTITIONS_KEY)
            if everything is None:
                raise MetadataTableUnavailable("its files partition has no partition list")
            names = sorted(mdr.live_files(everything))
        else:
            names = sorted(mdr.partition_key(p) for p in partitions)
        found = self.records(mdr.FILES, names)
        return {mdr.data_partition(k): mdr.live_files(found.get(k)) for k in names}


__all__ = ["FOLDER", "MetadataSlice", "MetadataTableReader", "MetadataTableUnavailable"]
