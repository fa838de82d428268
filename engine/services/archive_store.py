"""Where archived instants are stored, one strategy per timeline layout: version 6's log files
`.hoodie/archived/.commits_.archive.<N>_1-0-1` of `HoodieArchivedMetaEntry` (`LogArchive`), and
layout 2's LSM history `.hoodie/timeline/history/` (`LsmArchive`, `engine.services.archive_lsm`).
`engine.services.archive` plans archival and removes the active files; only this differs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from engine.constants import METAFOLDER
from engine.errors import CorruptTableError
from engine.services import archive_lsm
from engine.table import archive_log
from engine.table.meta_client import MetaClient
from engine.timeline import avro_models
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant

SERVICE_MODELS = {
    Action.CLEAN: "HoodieCleanMetadata",
    Action.ROLLBACK: "HoodieRollbackMetadata",
}


def archive_folder(meta: MetaClient) -> str:
    """Version 6's archive folder (`.hoodie/<hoodie.archivelog.folder>`)."""
    return f"{METAFOLDER}/{meta.config.archivelog_folder}"


def _entry(meta: MetaClient, inst: Instant) -> dict:
    body = meta.read_instant(inst)
    if inst.action.is_write:
        metadata: CommitMetadata | dict | None = CommitMetadata.from_json(body)
    else:
        model = SERVICE_MODELS.get(inst.action)
        metadata = avro_models.deserialize(model, body) if model else None
    return archive_log.archived_entry(inst.time, inst.action.value, "COMPLETED", metadata)


class ArchiveStore(Protocol):
    """Where a timeline layout keeps its archived instants."""

    def held_times(self, meta: MetaClient) -> set[str]:
        """The instant times the archive holds (an interrupted archival's are skipped next time)."""
        ...

    def append(self, meta: MetaClient, instants: Sequence[Instant]) -> None:
        """Write `instants` (none held yet) durably: after this they are archived."""
        ...

    def entries(self, meta: MetaClient) -> list[dict]:
        """The archived instants as `HoodieArchivedMetaEntry`-shaped dicts, oldest first."""
        ...

    def recently_held(self, meta: MetaClient) -> set[str]:
        """The times an archival killed before removing its instants may have left active."""
        ...

    def settle(self, meta: MetaClient) -> None:
        """Finish what an archive write killed halfway left (the caller holds the table lock)."""
        ...


class LogArchive:
    """Timeline layout 1 (version 6): `.commits_.archive.<N>_1-0-1` log files."""

    def held_times(self, meta: MetaClient) -> set[str]:
        return {e.get("commitTime") for e in _read_log_entries(meta)}  # type: ignore[misc]

    def append(self, meta: MetaClient, instants: Sequence[Instant]) -> None:
        folder = archive_folder(meta)
        meta.storage.makedirs(folder)
        block = archive_log.encode_archive_block([_entry(meta, i) for i in instants])
        version = 1 + max(
            (v for f in meta.storage.list_dir(folder) if (v := archive_log.parse_archive_file_name(f.name)) is not None),
            default=0,
        )
        meta.storage.create_exclusive(f"{folder}/{archive_log.archive_file_name(version)}", block)

    def entries(self, meta: MetaClient) -> list[dict]:
        return _read_log_entries(meta)

    def recently_held(self, meta: MetaClient) -> set[str]:
        folder = archive_folder(meta)
        versions = [
            (v, f.path) for f in meta.storage.list_dir(folder)
            if (v := archive_log.parse_archive_file_name(f.name)) is not None
        ]
        if not versions:
            return set()
        _v, newest = max(versions)
        try:
            return {e.get("commitTime") for e in archive_log.decode_archive_file(meta.storage.read_bytes(newest))}  # type: ignore[misc]
        except CorruptTableError as exc:
            raise CorruptTableError(f"{meta.storage.uri(newest)}: {exc}") from exc

    def settle(self, meta: MetaClient) -> None:
        pass  # each archive file is created whole: nothing is ever half done


class LsmArchive:
    """Timeline layout 2 (versions 8, 9): the LSM history (`engine.services.archive_lsm`)."""

    def held_times(self, meta: MetaClient) -> set[str]:
        return archive_lsm.held_times(meta)

    def append(self, meta: MetaClient, instants: Sequence[Instant]) -> None:
        archive_lsm.append(meta, instants)

    def entries(self, meta: MetaClient) -> list[dict]:
        return archive_lsm.archived_entries(meta)

    def recently_held(self, meta: MetaClient) -> set[str]:
        return archive_lsm.held_times(meta)

    def settle(self, meta: MetaClient) -> None:
        archive_lsm.settle(meta)  # a manifest written, `_version_` not yet


def store_for(meta: MetaClient) -> ArchiveStore:
    """The archive of the table's timeline layout."""
    return LsmArchive() if meta.layout.version >= 2 else LogArchive()


def _read_log_entries(meta: MetaClient) -> list[dict]:
    return list(_iter_entries(meta))


def _iter_entries(meta: MetaClient) -> Iterator[dict]:
    folder = archive_folder(meta)
    files = []
    for f in meta.storage.list_dir(folder):
        v = archive_log.parse_archive_file_name(f.name)
        if v is not None:
            files.append((v, f.path))
    for _v, path in sorted(files):
        try:
            yield from archive_log.decode_archive_file(meta.storage.read_bytes(path))
        except CorruptTableError as exc:
            raise CorruptTableError(f"{meta.storage.uri(path)}: {exc}") from exc
