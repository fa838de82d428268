"""Timeline: instants, their ordering and states (pure), plus loading them through Storage."""

from engine.timeline.instant import (
    Action,
    Instant,
    State,
    format_instant_time,
    is_valid_instant_time,
    next_instant_time,
    parse_instant_time,
)
from engine.timeline.timeline import Timeline

__all__ = [
    "Action",
    "Instant",
    "State",
    "Timeline",
    "format_instant_time",
    "is_valid_instant_time",
    "next_instant_time",
    "parse_instant_time",
]
