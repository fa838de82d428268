"""Which files belong to a table: nested tables are someone else's, and services check before deleting.

A folder below a table's base that holds a `.hoodie/` folder of its own is another table (put
there by hand, by an older version, or by another tool). Its files are never the outer table's:
`MetaClient.list_data_files` leaves the whole folder out (`nested_table_roots`, pure), so no
view, plan or reader of the outer table sees them.

Defence in depth: every service that deletes data files (archival, clean, rollback, restore,
repair, compaction and a failed write's clean-up) passes the paths through `FileOwnership`
first, which keeps only files that

- are named as a Hudi base or log file,
- do not lie in or below a folder holding its own `.hoodie/` (checked on storage, not taken
  from a listing, so a listing bug cannot hand another table's files to a service), and
- do not lie in a partition folder whose `.hoodie_partition_metadata` records a depth other
  than the folder's depth below this table (another table's partition: `outer/nested/2024`
  is depth 2 for `outer` but depth 1 for the table at `outer/nested`).

What it refuses is logged (warning, logger `engine.table.ownership`) and kept in `skipped`, so
the service's result can report it; which instants and file ids a service may delete is that
service's own rule (rollback: its instant's; archival: known failed writes').
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.constants import METAFOLDER, PARTITION_METADATA_FILE
from engine.data.file_names import is_data_file, parse_base_file_name
from engine.storage import Storage

_log = logging.getLogger(__name__)


def nested_table_roots(paths: Iterable[str]) -> set[str]:
    """The folders (relative to a table's base) that hold a `.hoodie/` of their own, found in a
    listing of file paths; the base's own `.hoodie/` is not one."""
    roots: set[str] = set()
    for path in paths:
        segments = path.split("/")
        if segments[0] == METAFOLDER:
            continue  # the table's own metadata (its metadata table holds a .hoodie/ too)
        for i in range(1, len(segments) - 1):
            if segments[i] == METAFOLDER:
                roots.add("/".join(segments[:i]))
                break
    # keep the outermost: a table nested in a nested table is inside the first already
    return {r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots)}


def is_below(path: str, roots: Iterable[str]) -> bool:
    """Whether relative `path` lies inside one of the relative folders `roots`."""
    return any(path.startswith(root + "/") for root in roots)


def partition_depth(text: str) -> int | None:
    """`partitionDepth` of a `.hoodie_partition_metadata` file's text; None when it has none."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "partitionDepth":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


@dataclass
class FileOwnership:
    """Decides, with storage checks cached per folder, whether data files belong to the table
    rooted at `storage`. One instance per service run (the cache does not notice new folders)."""

    storage: Storage
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    _nested: dict[str, bool] = field(default_factory=dict, repr=False)
    _depth: dict[str, int | None] = field(default_factory=dict, repr=False)

    def foreign_reason(self, rel: str) -> str | None:
        """Why `rel` (relative to the base) is not this table's data file; None if it is."""
        if rel.startswith(METAFOLDER + "/"):
            return None  # the table's own metadata folder (timeline, index files)
        folder, _, name = rel.rpartition("/")
        if not is_data_file(name):
            return "not named as a Hudi base, log or CDC log file"
        segments = folder.split("/") if folder else []
        for i in range(1, len(segments) + 1):
            candidate = "/".join(segments[:i])
            if self._holds_table(candidate):
                return f"inside the table at {self.storage.uri(candidate)}"
        recorded = self._recorded_depth(folder)
        if recorded is not None and recorded != len(segments):
            return (
                f"its folder's {PARTITION_METADATA_FILE} records partition depth {recorded}, but the "
                f"folder is {len(segments)} deep in this table (another table's partition)"
            )
        return None

    def owned(self, paths: Iterable[str], service: str) -> list[str]:
        """The paths that are this table's, in order; the others are logged and kept in `skipped`."""
        out = []
        for rel in paths:
            reason = self.foreign_reason(rel)
            if reason is None:
                out.append(rel)
                continue
            self.skipped.append((rel, reason))
            _log.warning(
                "%s of %s: not deleting %s: %s", service, self.storage.base_uri, self.storage.uri(rel), reason
            )
        return out

    @property
    def skipped_paths(self) -> list[str]:
        return [p for p, _ in self.skipped]

    def _holds_table(self, folder: str) -> bool:
        if folder not in self._nested:
            self._nested[folder] = self.storage.exists(f"{folder}/{METAFOLDER}")
        return self._nested[folder]

    def _recorded_depth(self, folder: str) -> int | None:
        if folder not in self._depth:
            rel = f"{folder}/{PARTITION_METADATA_FILE}" if folder else PARTITION_METADATA_FILE
            try:
                text = self.storage.read_bytes(rel).decode("utf-8", "replace")
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                self._depth[folder] = None
            else:
                self._depth[folder] = partition_depth(text)
        return self._depth[folder]


def remove_instant_base_files(
    storage: Storage,
    instant: str,
    groups: dict[str, set[str] | None],
    service: str,
    keep: Iterable[str] = (),
) -> list[str]:
    """Delete this table's base files named with `instant` in the partitions of `groups` (only those
    of its file ids; None: any), except `keep`: what an interrupted attempt, or a retried task, of a
    table service that writes base files left. Returns the paths deleted."""
    kept = set(keep)
    removed = []
    ownership = FileOwnership(storage)
    for partition, file_ids in sorted(groups.items()):
        for info in storage.list_dir(partition):
            bn = parse_base_file_name(info.name)
            if bn is None or bn.instant != instant or info.path in kept:
                continue
            if (file_ids is None or bn.file_id in file_ids) and ownership.owned([info.path], service):
                storage.delete(info.path)
                removed.append(info.path)
    return removed

