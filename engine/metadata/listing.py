"""A table's data files from its metadata table's `files` partition, where it can answer; else
from listing storage (`engine.table.meta_client.MetaClient.list_data_files`), with the reason.

Reads use it (`engine.read.plan`): on object stores a snapshot then reads a few metadata files
instead of listing every data folder. The listing is taken only from a metadata table that is in
sync with the data timeline (`MetadataTableReader.check_in_sync`); a missing, older-version,
behind or unreadable one is a notice and a storage listing, never a wrong answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.data.file_names import join_path
from engine.errors import CorruptTableError, StorageError, UnsupportedFeatureError
from engine.metadata.reader import FOLDER, MetadataTableReader, MetadataTableUnavailable
from engine.table.fs_view import DataFile
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)
METADATA = "metadata table"
STORAGE = "storage"


@dataclass(frozen=True)
class Listing:
    """The data files (None: list storage), where they came from, and why not the metadata table
    when the table has one that could not answer."""

    files: list[DataFile] | None
    source: str
    notice: str | None = None


def data_files(meta: MetaClient, timeline: Timeline) -> Listing:
    """The data files of the table at `meta` as its metadata table lists them, when it can."""
    if meta.config.version < 8 or not meta.storage.exists(f"{FOLDER}/.hoodie/hoodie.properties"):
        return Listing(None, STORAGE)
    try:
        listing = MetadataTableReader(meta, timeline).file_listing()
    except (MetadataTableUnavailable, CorruptTableError, UnsupportedFeatureError, StorageError) as exc:
        notice = f"{meta.storage.base_uri}: listing storage, not the metadata table: {exc}"
        _log.warning("%s", notice)
        return Listing(None, STORAGE, notice)
    files = [DataFile(join_path(p, name), size) for p, names in sorted(listing.items()) for name, size in sorted(names.items())]
    return Listing(files, METADATA)


__all__ = ["METADATA", "STORAGE", "Listing", "data_files"]
