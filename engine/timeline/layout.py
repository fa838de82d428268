"""Timeline layouts: where a table's instant files live and how they are named (pure, no I/O).

Layout 1 (table version 6): every instant file directly under `.hoodie/`, named as in
`engine.timeline.instant`. Layout 2 (table versions 8 and 9, Apache Hudi 1.x): under
`.hoodie/<hoodie.timeline.path>` (default `timeline`), requested and inflight files named as in
layout 1, and a completed instant named with its completion time: `<time>_<completion>.<action>`
(Java `InstantFileNameGeneratorV2`). The archived timeline of layout 2 is an LSM tree under
`<timeline>/<hoodie.timeline.history.path>` (default `history`): `_version_`, `manifest_<N>`,
parquet files.

`layout_for(config)` picks one; `MetaClient` lists and names instant files only through it,
so the rest of the engine sees one `Timeline` whatever the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.constants import METAFOLDER
from engine.errors import CorruptTableError
from engine.timeline.instant import Action, Instant, State, is_valid_instant_time

TIMELINE_PATH_KEY = "hoodie.timeline.path"
HISTORY_PATH_KEY = "hoodie.timeline.history.path"


@dataclass(frozen=True)
class TimelineLayout:
    """One timeline layout: `folder` holds the active instant files (relative to the table base)."""

    version: int
    folder: str
    history: str  # layout 1: the archive folder; layout 2: the LSM history folder

    def parse(self, name: str) -> Instant | None:
        """The instant a file name in `folder` stands for; None for other files (properties,
        `.crc` side files, folders). In layout 2 a completed file without its completion time,
        and in layout 1 one with it, is a mixed timeline: CorruptTableError."""
        head, _, rest = name.partition(".")
        requested, sep, completion = head.partition("_")
        if not rest or not is_valid_instant_time(requested):
            return None
        if sep:
            if self.version < 2 or not is_valid_instant_time(completion) or "." in rest:
                return None if self.version >= 2 else _mixed(name, self)
            try:
                action = Action(rest)
            except ValueError:
                return None
            return Instant(requested, action, State.COMPLETED, completion)
        inst = Instant.parse_file_name(name)
        if inst is not None and inst.is_completed and self.version >= 2:
            return _mixed(name, self)
        return inst

    def file_name(self, instant: Instant) -> str:
        """The file name of `instant` in this layout."""
        if self.version >= 2 and instant.is_completed:
            if instant.completion_time is None:
                raise ValueError(f"{instant} has no completion time (needed in timeline layout 2)")
            return f"{instant.time}_{instant.completion_time}.{instant.action.value}"
        return instant.file_name


def _mixed(name: str, layout: TimelineLayout) -> Instant:
    raise CorruptTableError(
        f"{layout.folder}/{name}: a completed instant named for timeline layout {1 if layout.version >= 2 else 2} "
        f"in a table of layout {layout.version} (a timeline with both layouts mixed)"
    )


LAYOUT_1 = TimelineLayout(1, METAFOLDER, f"{METAFOLDER}/archived")


def layout_for(version: int, layout_version: int, properties: dict[str, str], archivelog_folder: str) -> TimelineLayout:
    """The layout of a table: 2 for table version 8 and later (or a stated layout version 2)."""
    if version >= 8 or layout_version >= 2:
        folder = f"{METAFOLDER}/{properties.get(TIMELINE_PATH_KEY) or 'timeline'}"
        return TimelineLayout(2, folder, f"{folder}/{properties.get(HISTORY_PATH_KEY) or 'history'}")
    return TimelineLayout(1, METAFOLDER, f"{METAFOLDER}/{archivelog_folder}")
