"""`MetaClient`: a table's metadata through Storage — config, timeline, commit metadata, file listing.

No Spark here: the console and the CLI browse tables with it alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import pyarrow as pa

from engine.config.table_config import TableConfig
from engine.constants import METAFOLDER, PARTITION_METADATA_FILE, PROPERTIES_FILE, TABLE_VERSION
from engine.data.file_names import partition_metadata
from engine.errors import (
    CorruptTableError,
    InstantNotFoundError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedTableVersionError,
)
from engine.schema import internal as internal_schema
from engine.schema.avro import avro_to_arrow
from engine.storage import Storage, storage_for
from engine.storage.base import FileInfo
from engine.table import schema_history
from engine.table.fs_view import DataFile, FileSystemView
from engine.table.ownership import is_below, nested_table_roots
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant, State, next_instant_time
from engine.timeline.layout import TimelineLayout, layout_for
from engine.timeline.timeline import Timeline

PROPERTIES_PATH = f"{METAFOLDER}/{PROPERTIES_FILE}"
_log = logging.getLogger(__name__)
_WARNED_NESTED: set[tuple[str, str]] = set()


@dataclass
class MetaClient:
    storage: Storage
    config: TableConfig

    # ---- opening / creating -------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Storage, storage_options: dict[str, str] | None = None) -> MetaClient:
        """Open the table at `path`; raises TableNotFoundError when there is none."""
        storage = path if isinstance(path, Storage) else storage_for(path, storage_options)
        try:
            text = storage.read_bytes(PROPERTIES_PATH).decode("utf-8")
        except FileNotFoundError as exc:
            raise TableNotFoundError(f"no Hudi table at {storage.base_uri} (missing {PROPERTIES_PATH})") from exc
        except UnicodeDecodeError as exc:
            raise CorruptTableError(f"{storage.uri(PROPERTIES_PATH)} is not UTF-8 text") from exc
        except (NotADirectoryError, IsADirectoryError) as exc:
            raise TableNotFoundError(f"no Hudi table at {storage.base_uri}") from exc
        try:
            config = TableConfig.from_text(text)
        except UnsupportedTableVersionError as exc:
            raise UnsupportedTableVersionError(f"{storage.uri(PROPERTIES_PATH)}: {exc}", exc.version) from None
        except CorruptTableError as exc:  # named with the file, as every error about a table's files is
            raise CorruptTableError(f"{storage.uri(PROPERTIES_PATH)}: {exc}") from None
        return cls(storage, config)

    @classmethod
    def create(cls, storage: Storage, config: TableConfig) -> MetaClient:
        """Write `.hoodie/hoodie.properties` (exclusively: an existing table is never overwritten).

        Refused with NestedTableError inside another table's folder or around one
        (`engine.table.placement`)."""
        from engine.table.placement import check_placement

        if storage.exists(PROPERTIES_PATH):
            raise TableExistsError(f"a Hudi table already exists at {storage.base_uri}")
        check_placement(storage)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        storage.makedirs(METAFOLDER)
        try:
            storage.create_exclusive(PROPERTIES_PATH, config.to_text(f"Properties saved on {stamp}").encode())
        except FileExistsError as exc:
            raise TableExistsError(f"a Hudi table already exists at {storage.base_uri}") from exc
        meta = cls(storage, config)
        if meta.layout.version >= 2:  # as Apache Hudi 1.x creates them (folders: local file systems only)
            storage.makedirs(meta.layout.folder)
            storage.makedirs(meta.layout.history)
        return meta

    def reload_config(self) -> TableConfig:
        """Read `hoodie.properties` again (after another step rewrote it: an upgrade) and use it."""
        self.config = MetaClient.open(self.storage).config
        return self.config

    @property
    def properties_uri(self) -> str:
        """Where `hoodie.properties` is (named in errors about the table's properties)."""
        return self.storage.uri(PROPERTIES_PATH)

    def remove_properties(self, keys: tuple[str, ...], reason: str, updates: dict[str, str] | None = None) -> None:
        """Drop `keys` from hoodie.properties (and set `updates`), keeping every other line as it is
        (any version: the file is edited, not rewritten from our model); the caller holds the
        table lock."""
        import javaproperties

        text = self.storage.read_bytes(PROPERTIES_PATH).decode("utf-8")
        props = javaproperties.loads(text)
        kept = {k: v for k, v in props.items() if k not in keys}
        kept.update(updates or {})
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = f"#{reason} at {stamp}\n" + javaproperties.dumps(kept, timestamp=False, sort_keys=False)
        self.storage.write_bytes(PROPERTIES_PATH, body.encode())
        self.config = TableConfig.from_properties(kept)

    def update_config(self, config: TableConfig, reason: str) -> None:
        """Replace `hoodie.properties` with `config` (one atomic write; the caller holds the table
        lock) and use it from now on. `reason` goes into the file's comment line."""
        if config.version != TABLE_VERSION:
            raise UnsupportedTableVersionError(
                f"{self.storage.uri(PROPERTIES_PATH)}: this engine rewrites the properties of table version "
                f"{TABLE_VERSION} only, not {config.version} (building a RECORD index needs that)", config.version)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.storage.write_bytes(PROPERTIES_PATH, config.to_text(f"{reason} at {stamp}").encode())
        self.config = config

    # ---- timeline ------------------------------------------------------------------------
    @property
    def layout(self) -> TimelineLayout:
        """Where the instant files live and how they are named (layout 1: version 6; 2: versions 8, 9)."""
        c = self.config
        return layout_for(c.version, c.timeline_layout_version, dict(c.extra), c.archivelog_folder)

    def list_timeline(self) -> tuple[list[FileInfo], bool]:
        """The files of the active timeline's folder (instant files among them), and whether older
        instants were archived (the archive folder holds files)."""
        layout = self.layout
        entries = self.storage.list_dir(layout.folder)
        history = layout.history.rpartition("/")[2]
        has_archive = any(f.is_dir and f.name == history for f in entries) and any(
            not f.is_dir for f in self.storage.list_dir(layout.history)
        )
        return [f for f in entries if not f.is_dir], has_archive

    def timeline_of(self, names: Iterable[str], has_archive: bool) -> Timeline:
        """The timeline that listed file `names` make up (other files are ignored)."""
        layout = self.layout
        return Timeline.from_instants((i for i in map(layout.parse, names) if i is not None), has_archive)

    def timeline(self) -> Timeline:
        """The active timeline, freshly listed."""
        files, has_archive = self.list_timeline()
        return self.timeline_of((f.name for f in files), has_archive)

    def instant_path(self, instant: Instant) -> str:
        layout = self.layout
        if layout.version >= 2 and instant.is_completed and instant.completion_time is None:
            found = self.completed_file_name(instant.time, instant.action)
            if found is None:  # a file about to be written: it completes now
                found = layout.file_name(instant.with_completion(next_instant_time(datetime.now(UTC), instant.time)))
            return f"{layout.folder}/{found}"
        return f"{layout.folder}/{layout.file_name(instant)}"

    def completed_file_name(self, time: str, action: Action) -> str | None:
        """The name of instant `time`'s completed file, None when there is none. Layout 1: its
        fixed name, if the file exists; layout 2: found by listing (the name holds the completion
        time)."""
        layout = self.layout
        if layout.version < 2:
            name = Instant(time, action, State.COMPLETED).file_name
            return name if self.storage.exists(f"{layout.folder}/{name}") else None
        for info in self.storage.list_dir(layout.folder):
            parsed = None if info.is_dir or not info.name.startswith(f"{time}_") else layout.parse(info.name)
            if parsed is not None and parsed.action is action:
                return info.name
        return None

    def encode_commit_metadata(self, metadata: CommitMetadata) -> bytes:
        """A write's commit metadata as its timeline file holds it: JSON in version 6, an Avro
        `HoodieCommitMetadata` (`HoodieReplaceCommitMetadata` with replaced file groups) in 8, 9."""
        if self.layout.version < 2:
            return metadata.to_bytes()
        from engine.timeline import avro_models

        record = avro_models.commit_metadata_to_avro(metadata)
        record["extraMetadata"].pop(avro_models.ROLLING_STAT_METADATA_KEY, None)  # an archival-only key
        if metadata.partition_to_replace_file_ids is not None:
            record["partitionToReplaceFileIds"] = metadata.partition_to_replace_file_ids
            return avro_models.serialize("HoodieReplaceCommitMetadata", record)
        return avro_models.serialize("HoodieCommitMetadata", record)

    def read_instant(self, instant: Instant) -> bytes:
        try:
            return self.storage.read_bytes(self.instant_path(instant))
        except FileNotFoundError as exc:
            raise InstantNotFoundError(f"instant {instant} has no file on the timeline") from exc

    def commit_metadata(self, instant: Instant | str, timeline: Timeline | None = None) -> CommitMetadata:
        """The metadata of a completed write instant."""
        if isinstance(instant, str):
            tl = timeline or self.timeline()
            found = tl.get(instant)
            if found is None or not found.is_completed:
                raise InstantNotFoundError(f"{instant} is not a completed instant of {self.storage.base_uri}")
            instant = found
        try:
            return CommitMetadata.from_bytes(self.read_instant(instant))
        except CorruptTableError as exc:
            raise CorruptTableError(f"{self.instant_path(instant)}: {exc}") from exc

    def completed_commits_newest_first(self, timeline: Timeline | None = None) -> Iterator[tuple[Instant, CommitMetadata]]:
        tl = timeline or self.timeline()
        for inst in reversed(tl.completed_writes.instants):
            yield inst, self.commit_metadata(inst)

    # ---- schema --------------------------------------------------------------------------
    def latest_avro_schema(self, timeline: Timeline | None = None, as_of: str | None = None) -> str | None:
        """The writer schema of the newest completed write (at or before `as_of`, as Apache Hudi's
        time travel resolves the table schema; else the create schema)."""
        for inst, meta in self.completed_commits_newest_first(timeline):
            if as_of is not None and inst.time > as_of:
                continue
            if meta.schema:
                return meta.schema
        return self.config.create_schema

    def latest_schema(
        self, timeline: Timeline | None = None, as_of: str | None = None,
        versions: list[internal_schema.InternalSchema] | None = None,
    ) -> pa.Schema | None:
        """The table's data schema (without meta columns; as of `as_of` when given), or None for a
        table never written. When the table has an internal schema (schema on read), the schema
        carries its column ids (`internal_schema.attach_versions`), so files written under older
        names are read by id. `versions`: the table's versions, when the caller has them at hand."""
        tl = timeline or self.timeline()
        avro = self.latest_avro_schema(tl, as_of)
        if not avro:
            return None
        schema = avro_to_arrow(avro)
        if versions is None:
            versions = self.schema_versions(tl)
        if versions:
            read = internal_schema.search(versions, as_of) if as_of and as_of.isdigit() else versions[-1]
            if read is not None:
                schema = internal_schema.attach_versions(schema, read, versions)
        return schema

    def schema_versions(self, timeline: Timeline | None = None) -> list[internal_schema.InternalSchema]:
        """The table's internal schema versions, oldest first ([] without schema on read)."""
        return schema_history.load(self.storage, timeline or self.timeline())

    # ---- files ---------------------------------------------------------------------------
    def list_data_files(self) -> list[DataFile]:
        """Every file below the base except `.hoodie/`, partition metadata, and the whole folder
        of any other table nested below this one (a folder holding its own `.hoodie/`)."""
        infos = self.storage.list_files_recursive("")
        nested = nested_table_roots(info.path for info in infos)
        for root in sorted(nested):
            if (self.storage.base_uri, root) not in _WARNED_NESTED:  # once per process, not per read
                _WARNED_NESTED.add((self.storage.base_uri, root))
                _log.warning("%s: ignoring %s, another table inside this one", self.storage.base_uri, self.storage.uri(root))
        out = []
        for info in infos:
            folders = info.path.split("/")[:-1]
            if any(seg.startswith(".") for seg in folders) or info.name == PARTITION_METADATA_FILE:
                continue  # .hoodie/, .temp/ ... are not partitions
            if nested and is_below(info.path, nested):
                continue
            out.append(DataFile(info.path, info.size))
        return out

    def file_system_view(
        self, timeline: Timeline | None = None, as_of: str | None = None, files: list[DataFile] | None = None
    ) -> FileSystemView:
        """The file groups of the table (as of `as_of`), from `files` when the caller listed them
        (the metadata table's listing, `engine.metadata.listing`), else from listing storage."""
        tl = timeline or self.timeline()
        replaced: dict[str, list[str]] = {}
        for inst in tl.completed.instants:
            if inst.action is Action.REPLACE_COMMIT and (as_of is None or inst.time <= as_of):
                for p, ids in (self.commit_metadata(inst).partition_to_replace_file_ids or {}).items():
                    replaced.setdefault(p, []).extend(ids)
        pending: dict[tuple[str, str], str] = {}
        if any(i.action is Action.COMPACTION for i in tl.pending.instants):
            from engine.table.compaction_plan import pending_compactions, pending_groups

            pending = pending_groups(pending_compactions(self, tl))
        older: Callable[[], dict[str, str]] | None = None
        if self.layout.version >= 2 and tl.has_archive:
            from engine.table import lsm_history

            older = partial(lsm_history.completion_times, self)  # archived instants' logs are sliced by it

        return FileSystemView.build(
            self.list_data_files() if files is None else files, tl, as_of=as_of, replaced=replaced, pending_compaction=pending,
            archived_completions=older,
        )

    def partitions_with_metadata(self) -> list[str]:
        """Every folder below the base holding a partition metadata file (not `.hoodie/` and
        other dot folders): what a write that did not say which partitions it created may have
        created (`engine.write.bulk_stream`)."""
        out = []
        for info in self.storage.list_files_recursive(""):
            folders = info.path.split("/")[:-1]
            if info.name == PARTITION_METADATA_FILE and folders and not any(seg.startswith(".") for seg in folders):
                out.append("/".join(folders))
        return sorted(out)

    def ensure_partition_metadata(self, partition: str, instant: str) -> None:
        """Write `<partition>/.hoodie_partition_metadata` once (the first writer wins)."""
        write_partition_metadata(self.storage, partition, instant)


def write_partition_metadata(storage: Storage, partition: str, instant: str) -> None:
    """Write `<partition>/.hoodie_partition_metadata` once (the first writer wins); also from
    write tasks, which have the storage but no MetaClient (`engine.write.bulk_files`)."""
    rel, body = partition_metadata(partition, instant)
    if storage.exists(rel):
        return
    try:
        storage.create_exclusive(rel, body)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StorageError(f"cannot write {storage.uri(rel)}: {exc}") from exc


def instant_file_names(instant: Instant) -> list[str]:
    """Every timeline file name an instant may have left (requested, inflight, completed)."""
    return [instant.with_state(s).file_name for s in State]
