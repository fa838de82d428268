"""Merging a file slice whose log holds partial updates: records that carry only some columns
(data blocks with the IS_PARTIAL header, Apache Hudi 1.x). Pure pyarrow/numpy, no I/O.

A partial record's block schema (its SCHEMA header) names the columns it carries; a column it
lacks is not null, it is "not given". Apache Hudi 1.x merges such records column by column
(`SparkRecordMergingUtils.mergePartialRecords`, through the mergers `BufferedRecordMergerFactory`
builds when a block is partial): merging a record `high` over a record `low` gives every column
`high` carries from `high` and the rest from `low`, and the result carries the union; its
ordering value, key and delete flag are `high`'s. Which record is `high`:

- COMMIT_TIME (`OverwriteWithLatestSparkRecordMerger.partialMerge`): always the later one. A delete
  replaces the state; a record after a delete (or first for its key) stands alone.
- EVENT_TIME (`DefaultSparkRecordMerger.partialMerge`): the later record unless both carry an
  ordering value and the earlier one's is strictly greater; so a late record with a lower
  ordering value still fills the columns the winner lacks. Deletes follow the rules of
  `engine.data.log_merge` (a natural-order delete always wins, and so on).

The log's records of a key are folded in log order into one state, which is then merged with the
base record the same way (the base record is the earlier one: COMMIT_TIME merges the state over
it; EVENT_TIME keeps the base record whole only if its ordering value is strictly greater). Like
Apache Hudi, the fold does not remember a delete that a later record of the log replaced: that
record is still merged over the base record. A record without a base record keeps nulls in the
columns no log record gave. Full (non-partial) blocks take part as records that carry every
column, which makes these rules the plain ones of `engine.data.log_merge` when nothing is partial.

This is a row-at-a-time fold in Python, taken only by slices with a partial block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class _State:
    """A key's merged log record (`src`: per column a row of base+data, -1 for none) or delete."""

    is_delete: bool
    ordering: Any
    src: np.ndarray | None = None  # int64 per column
    has: np.ndarray | None = None  # bool per column: the record carries it
    natural: bool = False


def _over(high: _State, low: _State) -> _State:
    assert high.src is not None and high.has is not None and low.src is not None and low.has is not None
    return _State(False, high.ordering, np.where(high.has, high.src, low.src), high.has | low.has)


def _strictly_greater(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a > b


def _fold(state: _State | None, event: _State, event_time: bool) -> _State:
    if state is None:
        return event
    if not event_time:
        if event.is_delete or state.is_delete:
            return event
        return _over(event, state)
    if event.is_delete:
        state_natural = state.is_delete and state.natural
        wins = not state_natural and (event.natural or not _strictly_greater(state.ordering, event.ordering))
        return event if wins else state
    if state.is_delete:
        return state if _strictly_greater(state.ordering, event.ordering) else event
    if _strictly_greater(state.ordering, event.ordering):
        return _over(state, event)
    return _over(event, state)


def merge_partial(
    base: pa.Table,
    data: pa.Table,
    keys: pa.Array,
    rows: np.ndarray,
    present: np.ndarray,
    is_delete: np.ndarray,
    is_natural: np.ndarray,
    ordering: pa.Array | None,
    base_ordering: pa.Array | None,
    key_column: str,
) -> pa.Table:
    """The live records of a slice: `base` (its base file's records) merged with the log's events.

    Events are in log order: `keys[i]` is event i's record key, `rows[i]` its row of `data`
    (-1 for a delete), `present[i]` which of `data`'s columns it carries (a bool row per event,
    `data`'s column order; all true for a full record). `ordering` holds the events' ordering
    values and `base_ordering` the base rows' (None: COMMIT_TIME). `base` and `data` have the
    same schema. Rows come as `engine.data.log_merge` orders them: base rows kept, then records
    from the log.
    """
    event_time = ordering is not None
    n_cols = data.num_columns
    nb = base.num_rows
    event_ord = ordering.to_pylist() if ordering is not None else [None] * len(keys)
    states: dict[str, _State] = {}
    for i, key in enumerate(keys.to_pylist()):
        if is_delete[i]:
            event = _State(True, event_ord[i], natural=bool(is_natural[i]))
        else:
            mask = present[i]
            src = np.where(mask, nb + rows[i], -1).astype(np.int64)
            event = _State(False, event_ord[i], src, mask.copy())
        states[key] = _fold(states.get(key), event, event_time)

    keep = np.ones(nb, dtype=bool)
    base_ord = base_ordering.to_pylist() if base_ordering is not None else [None] * nb
    matched: set[str] = set()
    merged: dict[str, _State] = {}
    for row, key in enumerate(base.column(key_column).to_pylist()):
        state = states.get(key)
        if state is None or key in matched:
            continue  # only a key's first base row meets the log (log_merge.merge_base)
        matched.add(key)
        if state.is_delete:
            base_wins = not state.natural and event_time and _strictly_greater(base_ord[row], state.ordering)
            keep[row] = base_wins
            continue
        if event_time and _strictly_greater(base_ord[row], state.ordering):
            continue  # the base record is the higher one and carries every column: kept whole
        keep[row] = False
        full = _State(False, base_ord[row], np.full(n_cols, row, dtype=np.int64), np.ones(n_cols, dtype=bool))
        merged[key] = _over(state, full)
    emitted = [
        merged.get(k, s) for k, s in states.items() if not s.is_delete and (k not in matched or k in merged)
    ]
    return pa.concat_tables([base.filter(pa.array(keep)), _assemble(base, data, emitted)])


def _assemble(base: pa.Table, data: pa.Table, records: list[_State]) -> pa.Table:
    if not records:
        return data.schema.empty_table()
    src = np.stack([r.src for r in records if r.src is not None])
    columns = []
    for c, field in enumerate(data.schema):
        both = pa.concat_arrays([base.column(c).combine_chunks(), data.column(c).combine_chunks()])
        idx = src[:, c]
        columns.append(pc.take(both, pa.array(idx, mask=idx < 0)).cast(field.type))
    return pa.Table.from_arrays(columns, schema=data.schema)


__all__ = ["merge_partial"]
