"""`Instant`: one entry of the timeline (time, action, state), parsed from and rendered to file names.

Timeline file names in table version 6 (all directly under `.hoodie/`):

| action       | requested                  | inflight                     | completed         |
|--------------|----------------------------|------------------------------|-------------------|
| commit       | T.commit.requested         | T.inflight                   | T.commit          |
| deltacommit  | T.deltacommit.requested    | T.deltacommit.inflight       | T.deltacommit     |
| others (X)   | T.X.requested              | T.X.inflight                 | T.X               |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from engine.errors import InvalidInputError

INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S"
_INSTANT_TIME_RE = re.compile(r"^\d{17}$")


class Action(StrEnum):
    """Timeline actions; values are the on-disk strings."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLUSTERING = "clustering"
    ROLLBACK = "rollback"
    CLEAN = "clean"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"

    @property
    def is_write(self) -> bool:
        """Actions whose completion makes new data files visible."""
        return self in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


class State(StrEnum):
    """The lifecycle of an instant: requested -> inflight -> completed."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"


_STATE_ORDER = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


def is_valid_instant_time(value: str) -> bool:
    """True if `value` is a 17-digit `yyyyMMddHHmmssSSS` instant time."""
    return bool(_INSTANT_TIME_RE.match(value or ""))


def format_instant_time(moment: datetime) -> str:
    """Render a UTC datetime as `yyyyMMddHHmmssSSS`."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime(INSTANT_TIME_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(value: str) -> datetime:
    """Parse `yyyyMMddHHmmssSSS` (UTC) into an aware datetime; raises InvalidInputError."""
    if not is_valid_instant_time(value):
        raise InvalidInputError(f"not an instant time (yyyyMMddHHmmssSSS): {value!r}")
    try:
        base = datetime.strptime(value[:14], INSTANT_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise InvalidInputError(f"not an instant time (yyyyMMddHHmmssSSS): {value!r}") from exc
    return base + timedelta(milliseconds=int(value[14:]))


def next_instant_time(now: datetime, after: str | None) -> str:
    """The instant time for `now`, bumped so that it is strictly greater than `after`."""
    candidate = format_instant_time(now)
    if after is not None and candidate <= after:
        candidate = format_instant_time(parse_instant_time(after) + timedelta(milliseconds=1))
    return candidate


@dataclass(frozen=True, order=False)
class Instant:
    """An immutable timeline entry. Ordered by (time, state) so a completed instant sorts last."""

    time: str
    action: Action
    state: State
    # when a completed instant completed (timeline layout 2, tables of version 8 and later name
    # it in the completed file: `<time>_<completion>.<action>`); None in layout 1. Not part of
    # equality: the instant is identified by (time, action, state) in both layouts.
    completion_time: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_instant_time(self.time):
            raise InvalidInputError(f"invalid instant time {self.time!r}")
        if self.completion_time is not None and not is_valid_instant_time(self.completion_time):
            raise InvalidInputError(f"invalid completion time {self.completion_time!r}")

    @classmethod
    def parse_file_name(cls, name: str) -> Instant | None:
        """Parse a timeline file name; None for files that are not instants (properties, dirs...)."""
        time, _, rest = name.partition(".")
        if not rest or not is_valid_instant_time(time):
            return None
        if rest == "inflight":
            return cls(time, Action.COMMIT, State.INFLIGHT)
        action_str, _, state_str = rest.partition(".")
        try:
            action = Action(action_str)
        except ValueError:
            return None
        if not state_str:
            return cls(time, action, State.COMPLETED)
        try:
            state = State(state_str)
        except ValueError:
            return None
        if state is State.COMPLETED:
            return None
        return cls(time, action, state)

    @property
    def file_name(self) -> str:
        """The timeline file name of this instant in this state."""
        if self.state is State.COMPLETED:
            return f"{self.time}.{self.action.value}"
        if self.state is State.INFLIGHT and self.action is Action.COMMIT:
            return f"{self.time}.inflight"
        return f"{self.time}.{self.action.value}.{self.state.value}"

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    def with_state(self, state: State) -> Instant:
        return Instant(self.time, self.action, state, self.completion_time if state is State.COMPLETED else None)

    def with_completion(self, completion_time: str) -> Instant:
        """This instant completed at `completion_time` (timeline layout 2 names it so)."""
        return Instant(self.time, self.action, State.COMPLETED, completion_time)

    def sort_key(self) -> tuple[str, int, str]:
        return (self.time, _STATE_ORDER[self.state], self.action.value)

    def __lt__(self, other: Instant) -> bool:
        return self.sort_key() < other.sort_key()

    def to_doc(self) -> dict[str, str]:
        """The instant's JSON form (`engine.serial.to_doc`): time, action and state."""
        return {"time": self.time, "action": self.action.value, "state": self.state.value}

    def __str__(self) -> str:
        return f"[{self.time}__{self.action.value}__{self.state.value.upper()}]"
