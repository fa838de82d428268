"""hudi-rs (the reference reader, `pip install hudi`) as the test oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder


def _table(path: str | Path):
    return HudiTableBuilder.from_base_uri(str(Path(path).resolve())).build()


def _rows(batches) -> list[dict]:
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def snapshot(path: str | Path, as_of: str | None = None) -> list[dict]:
    opts = HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    return _rows(_table(path).read(opts))


def incremental(path: str | Path, start: str, end: str | None = None) -> list[dict]:
    opts = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(start)
    if end is not None:
        opts = opts.with_end_timestamp(end)
    return _rows(_table(path).read(opts))


def arrow_snapshot(path: str | Path, as_of: str | None = None) -> pa.Table | None:
    """hudi-rs's snapshot as one Arrow table (None when it returns no batches)."""
    opts = HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    batches = _table(path).read(opts)
    return pa.Table.from_batches(batches) if batches else None


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["_hoodie_partition_path"] or "", r["_hoodie_record_key"], r["_hoodie_commit_seqno"]))
