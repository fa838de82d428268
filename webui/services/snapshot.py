"""One consistent look at a table's metadata, cached by its timeline listing.

`TableSnapshot.load(meta)` lists `.hoodie/` once; the fingerprint of that listing (the sorted
instant file names) keys a per-process cache of what is expensive to rebuild: the
file-system view and the parsed commit metadata. Completed commit files never change, so a
commit's parsed metadata is cached by (table, file name) for good; the view changes only with
the timeline (a write, clean or rollback always adds or removes an instant file). Derived
values are kept once per (table, kind): a new fingerprint replaces the old value, so a table
written often does not fill the cache with stale views.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from engine.facade import CommitMetadata, FileSystemView, Instant, MetaClient, Timeline, metadata_partitions

_LOCK = threading.Lock()
_COMMITS: OrderedDict[tuple[str, str], CommitMetadata] = OrderedDict()
_VIEWS: OrderedDict[tuple[str, str], tuple[str, Any]] = OrderedDict()  # (table, kind) -> (fingerprint, value)
MAX_COMMITS = 20_000
MAX_VIEWS = 256


_INSTANT_FILE = re.compile(r"^\d{17}[._]")  # <time>.<action>..., or <time>_<completion>.<action> (layout 2)


def fingerprint_of(names: list[str], has_archive: bool, partitions: str = "") -> str:
    """The timeline's files, and the metadata partitions the properties name (a build or drop of
    one changes no data instant, but what the overview shows)."""
    digest = hashlib.sha256()
    for n in sorted(names):
        digest.update(n.encode())
        digest.update(b"\n")
    digest.update(b"archive" if has_archive else b"-")
    digest.update(partitions.encode())
    return digest.hexdigest()[:24]


@dataclass
class TableSnapshot:
    meta: MetaClient
    timeline: Timeline
    fingerprint: str
    mtimes: dict[str, int] = field(default_factory=dict)  # timeline file name -> epoch ms

    @classmethod
    def load(cls, meta: MetaClient) -> TableSnapshot:
        listed, has_archive = meta.list_timeline()  # .hoodie/ (version 6) or .hoodie/timeline/ (8, 9)
        files = [f for f in listed if _INSTANT_FILE.match(f.name)]
        names = [f.name for f in files]
        mtimes = {f.name: f.mtime_ms for f in files if f.mtime_ms is not None}
        fingerprint = fingerprint_of(names, has_archive, ",".join(metadata_partitions(meta.config)))
        timeline = _cached(meta.storage.base_uri, fingerprint, "timeline",
                           lambda: meta.timeline_of(names, has_archive))  # parsed only when it changed
        return cls(meta, timeline, fingerprint, mtimes)

    @property
    def base(self) -> str:
        return self.meta.storage.base_uri

    def commit(self, instant: Instant) -> CommitMetadata:
        """The parsed metadata of a completed write (cached: completed commit files are immutable)."""
        key = (self.base, f"{instant.file_name}:{instant.completion_time}")
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
        return _cached(self.base, self.fingerprint, what, build)

    def view(self) -> FileSystemView:
        return self.cached("view", lambda: self.meta.file_system_view(self.timeline))

    def completed_at_ms(self, instant: Instant) -> int | None:
        try:
            return self.mtimes.get(self.meta.layout.file_name(instant))
        except ValueError:  # layout 2, an instant built without its completion time
            return None

    def requested_at_ms(self, instant: Instant) -> int | None:
        from engine.facade import State

        return self.mtimes.get(self.meta.layout.file_name(instant.with_state(State.REQUESTED)))


def _cached(base: str, fingerprint: str, what: str, build: Any) -> Any:
    key = (base, what)
    with _LOCK:
        found = _VIEWS.get(key)
        if found is not None and found[0] == fingerprint:
            _VIEWS.move_to_end(key)
            return found[1]
    value = build()
    with _LOCK:
        _VIEWS[key] = (fingerprint, value)
        _VIEWS.move_to_end(key)
        while len(_VIEWS) > MAX_VIEWS:
            _VIEWS.popitem(last=False)
    return value


def clear_cache() -> None:
    with _LOCK:
        _COMMITS.clear()
        _VIEWS.clear()
