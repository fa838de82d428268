"""How a read merges file slices and which commits it keeps: pure, shared by the Spark scan
(`engine.data.scan`) and the read plans (`engine.read.plan`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import COMMIT_TIME_COL
from engine.data.slice_reader import MergeMode

CommitRange = tuple[str | None, str | None]


@dataclass(frozen=True)
class SliceRead:
    """How scan tasks merge file slices (merge-on-read): the ordering field, the merge mode, which
    instants' log blocks count, the time-travel instant and the incremental range."""

    ordering_field: str | None
    mode: MergeMode
    committed: Callable[[str], bool]
    as_of: str | None = None
    commit_range: CommitRange | None = None


def commit_filter(table: pa.Table, commit_range: CommitRange | None) -> pa.Table:
    """The rows of `table` committed in `commit_range` (start, end] (all rows when None)."""
    if commit_range is None:
        return table
    start, end = commit_range
    times = table.column(COMMIT_TIME_COL)
    mask = pc.is_valid(times)
    if start is not None:
        mask = pc.and_(mask, pc.greater(times, start))
    if end is not None:
        mask = pc.and_(mask, pc.less_equal(times, end))
    return table.filter(mask)
