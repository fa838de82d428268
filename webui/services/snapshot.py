"""One consistent look at a table's metadata, cached by its timeline listing.

`TableSnapshot.load(meta)` lists `.hoodie/` once; the fingerprint of that listing (the sorted
instant file names) keys a per-process cache of what is expensive to rebuild: the
file-system view and the parsed commit metadata. Completed commit files never change, so a
commit's parsed metadata is cached by (table, file name) for good; the view changes only with
the timeline (a write, clean or rollback always adds or removes an instant file).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from engine.constants import METAFOLDER
from engine.table.commit_metadata import CommitMetadata
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Instant
from engine.timeline.timeline import Timeline

_LOCK = threading.Lock()
_COMMITS: OrderedDict[tuple[str, str], CommitMetadata] = OrderedDict()
_VIEWS: OrderedDict[tuple[str, str], Any] = OrderedDict()
MAX_COMMITS = 20_000
MAX_VIEWS = 32


_INSTANT_FILE = re.compile(r"^\d{17}\.")


def fingerprint_of(names: list[str], has_archive: bool) -> str:
    digest = hashlib.sha256()
    for n in sorted(names):
        digest.update(n.encode())
        digest.update(b"\n")
    digest.update(b"archive" if has_archive else b"-")
    return digest.hexdigest()[:24]


@dataclass
class TableSnapshot:
    meta: MetaClient
    timeline: Timeline
    fingerprint: str
    mtimes: dict[str, int] = field(default_factory=dict)  # timeline file name -> epoch ms

    @classmethod
    def load(cls, meta: MetaClient) -> TableSnapshot:
        entries = meta.storage.list_dir(METAFOLDER)
        files = [f for f in entries if not f.is_dir and _INSTANT_FILE.match(f.name)]
        names = [f.name for f in files]
        archive_dir = meta.config.archivelog_folder
        has_archive = any(f.is_dir and f.name == archive_dir for f in entries) and bool(
            meta.storage.list_dir(f"{METAFOLDER}/{archive_dir}")
        )
        mtimes = {f.name: f.mtime_ms for f in files if f.mtime_ms is not None}
        fingerprint = fingerprint_of(names, has_archive)
        key = (meta.storage.base_uri, f"{fingerprint}:timeline")
        with _LOCK:
            timeline = _VIEWS.get(key)
        if timeline is None:  # parse the listing only when it changed
            timeline = Timeline.from_file_names(names, has_archive)
            with _LOCK:
                _VIEWS[key] = timeline
                while len(_VIEWS) > MAX_VIEWS:
                    _VIEWS.popitem(last=False)
        return cls(meta, timeline, fingerprint, mtimes)

    @property
    def base(self) -> str:
        return self.meta.storage.base_uri

    def commit(self, instant: Instant) -> CommitMetadata:
        """The parsed metadata of a completed write (cached: completed commit files are immutable)."""
        key = (self.base, instant.file_name)
        with _LOCK:
            found = _COMMITS.get(key)
            if found is not None:
                _COMMITS.move_to_end(key)
                return found
        parsed = self.meta.commit_metadata(instant)
        with _LOCK:
            _COMMITS[key] = parsed
            while len(_COMMITS) > MAX_COMMITS:
                _COMMITS.popitem(last=False)
        return parsed

    def cached(self, what: str, build: Any) -> Any:
        """A value derived from this timeline (and the files it makes visible), built once."""
        key = (self.base, f"{self.fingerprint}:{what}")
        with _LOCK:
            if key in _VIEWS:
                _VIEWS.move_to_end(key)
                return _VIEWS[key]
        value = build()
        with _LOCK:
            _VIEWS[key] = value
            while len(_VIEWS) > MAX_VIEWS:
                _VIEWS.popitem(last=False)
        return value

    def view(self) -> FileSystemView:
        return self.cached("view", lambda: self.meta.file_system_view(self.timeline))

    def completed_at_ms(self, instant: Instant) -> int | None:
        return self.mtimes.get(instant.file_name)

    def requested_at_ms(self, instant: Instant) -> int | None:
        from engine.timeline.instant import State

        return self.mtimes.get(instant.with_state(State.REQUESTED).file_name)


def clear_cache() -> None:
    with _LOCK:
        _COMMITS.clear()
        _VIEWS.clear()
