"""`Timeline`: the pure, immutable view of a table's instants (no I/O here).

Each instant time appears once, in its most advanced state (a completed commit also leaves
its `.requested` and `.inflight` files behind; a completed compaction is a `commit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from engine.timeline.instant import Action, Instant, State

_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


@dataclass(frozen=True)
class Timeline:
    """Instants sorted by time, one per instant time (plus the savepoint of a savepointed commit).

    Immutable: the sets every visibility check consults (completed write times, the archived
    boundary) are computed once per timeline (`cached_property` writes the instance `__dict__`
    directly, which a frozen dataclass allows), so building a view over many files stays linear.
    """

    instants: tuple[Instant, ...]
    # whether older instants were archived: only then can a file predating the first instant be
    # valid; without an archive such a file is debris of a failed write and stays hidden
    has_archive: bool = True

    @classmethod
    def from_instants(cls, instants: Iterable[Instant], has_archive: bool = True) -> Timeline:
        """Collapse all timeline files' instants into one instant per time (most advanced state wins)."""
        best: dict[str, Instant] = {}
        savepoints: dict[str, Instant] = {}
        for inst in instants:
            if inst.action is Action.SAVEPOINT:
                # a savepoint shares the time of the commit it protects: keep both
                cur_sp = savepoints.get(inst.time)
                if cur_sp is None or _STATE_RANK[inst.state] > _STATE_RANK[cur_sp.state]:
                    savepoints[inst.time] = inst
                continue
            cur = best.get(inst.time)
            if cur is None or _STATE_RANK[inst.state] > _STATE_RANK[cur.state]:
                best[inst.time] = inst
            elif _STATE_RANK[inst.state] == _STATE_RANK[cur.state] and inst.action is Action.COMMIT:
                # compaction completes as a commit: the commit file names the finished action
                best[inst.time] = inst
        return cls(tuple(sorted([*best.values(), *savepoints.values()])), has_archive)

    @classmethod
    def from_file_names(cls, names: Iterable[str], has_archive: bool = True) -> Timeline:
        parsed = (Instant.parse_file_name(n) for n in names)
        return cls.from_instants((i for i in parsed if i is not None), has_archive)

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def filter(self, *, actions: Iterable[Action] | None = None, completed: bool | None = None) -> Timeline:
        acts = set(actions) if actions is not None else None
        return Timeline(
            tuple(
                i
                for i in self.instants
                if (acts is None or i.action in acts) and (completed is None or i.is_completed == completed)
            )
        )

    def filter_times(self, times: Iterable[str]) -> Timeline:
        """The instants whose time is one of `times`."""
        wanted = set(times)
        return Timeline(tuple(i for i in self.instants if i.time in wanted))

    @property
    def completed(self) -> Timeline:
        return self.filter(completed=True)

    @property
    def pending(self) -> Timeline:
        return self.filter(completed=False)

    @property
    def writes(self) -> Timeline:
        """Instants that write data files (commit, deltacommit, replacecommit, compaction)."""
        return Timeline(tuple(i for i in self.instants if i.action.is_write or i.action is Action.COMPACTION))

    @property
    def completed_writes(self) -> Timeline:
        return Timeline(tuple(i for i in self.instants if i.action.is_write and i.is_completed))

    def get(self, time: str) -> Instant | None:
        """The instant at `time` (not its savepoint: see `savepoints`)."""
        return self._by_time.get(time)

    @cached_property
    def _by_time(self) -> dict[str, Instant]:
        return {i.time: i for i in self.instants if i.action is not Action.SAVEPOINT}

    @property
    def savepoints(self) -> Timeline:
        """Completed savepoints (each at the time of the commit it protects)."""
        return Timeline(tuple(i for i in self.instants if i.action is Action.SAVEPOINT and i.is_completed))

    @property
    def pending_services(self) -> Timeline:
        """Pending table services a crash may have interrupted (rollback, restore, clean)."""
        acts = (Action.ROLLBACK, Action.RESTORE, Action.CLEAN)
        return Timeline(tuple(i for i in self.instants if i.action in acts and not i.is_completed))

    def is_completed(self, time: str) -> bool:
        inst = self.get(time)
        return inst is not None and inst.is_completed

    @cached_property
    def completion_times(self) -> dict[str, str]:
        """time -> completion time of completed instants (timeline layout 2; empty in layout 1)."""
        return {i.time: i.completion_time for i in self.instants if i.is_completed and i.completion_time}

    @cached_property
    def completed_times(self) -> frozenset[str]:
        return frozenset(i.time for i in self.instants if i.is_completed)

    @property
    def last(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    @property
    def last_time(self) -> str | None:
        return self.instants[-1].time if self.instants else None

    @property
    def first_time(self) -> str | None:
        return self.instants[0].time if self.instants else None

    def up_to(self, time: str) -> Timeline:
        """Instants at or before `time` (time travel)."""
        return Timeline(tuple(i for i in self.instants if i.time <= time))

    def between(self, start: str | None, end: str | None) -> Timeline:
        """Instants in the half-open range (start, end]."""
        return Timeline(
            tuple(
                i
                for i in self.instants
                if (start is None or i.time > start) and (end is None or i.time <= end)
            )
        )

    @cached_property
    def completed_write_times(self) -> frozenset[str]:
        """Times of completed write instants (not savepoints or services sharing a time)."""
        return frozenset(i.time for i in self.instants if i.action.is_write and i.is_completed)

    @cached_property
    def archived_before(self) -> str | None:
        """Instants older than this belong to archived commits (None when nothing was archived).

        It is the first write instant on the active timeline, as in hudi-rs: a restore or savepoint
        kept active from before the archived range must not hide the archived commits. When every
        active write was rolled back, the first remaining instant that is not a restore or savepoint
        bounds the archived range.
        """
        if not self.has_archive:
            return None
        first = next((i.time for i in self.instants if i.action.is_write), None)
        if first is None:
            first = next((i.time for i in self.instants if i.action not in (Action.RESTORE, Action.SAVEPOINT)), None)
        return first

    def is_valid_write(self, instant: str) -> bool:
        """Whether files (or index entries) written by `instant` count: it is a completed write,
        or it predates the active timeline of a table whose older instants were archived.

        A completed savepoint at the same time does not count: during a restore the commit it
        protects is pending and its remaining files must stay hidden.
        """
        if instant in self.completed_write_times:
            return True
        first = self.archived_before
        return first is not None and instant < first

    def is_visible(self, file_instant: str) -> bool:
        """A data file is visible if its instant is a completed write, or predates the timeline."""
        return self.is_valid_write(file_instant)


@dataclass(frozen=True)
class CommittedInstants:
    """Which instants' data (merge-on-read log blocks) counts for a write's merged view (picklable, shipped to tasks):
    completed writes, and anything older than the active timeline when older instants were archived."""

    completed: frozenset[str]
    archived_before: str | None = None

    def __call__(self, instant: str) -> bool:
        return instant in self.completed or (self.archived_before is not None and instant < self.archived_before)

    @classmethod
    def of(cls, timeline: Timeline) -> CommittedInstants:
        return cls(timeline.completed_write_times, timeline.archived_before)
