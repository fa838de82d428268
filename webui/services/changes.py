"""A commit's changes for the console (issue 37): the records the write inserted, updated (before
and after, side by side) and deleted, paged, from the engine's CDC reader (the table's CDC log, or
inferred from the file group versions). No Spark."""

from __future__ import annotations

import math
from typing import Any

from werkzeug.exceptions import BadRequest, NotFound

from engine.facade import HistoryUnavailableError, InstantNotFoundError, read_instant_changes
from webui.services.snapshot import TableSnapshot

CHANGES_PAGE = 50
MAX_PER_PAGE = 500
OPS = {"i": "insert", "u": "update", "d": "delete"}


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    return str(value)


def commit_changes(snap: TableSnapshot, time: str, op: str | None = None, page: int = 1,
                   per_page: int = CHANGES_PAGE) -> dict[str, Any]:
    """One page of the changes of the write at `time` (only `op`'s: 'i', 'u' or 'd', when given),
    with the count per operation. `unavailable`: why the changes cannot be shown (history cleaned)."""
    if op is not None and op not in OPS:
        raise BadRequest(f"op must be one of {', '.join(OPS)} (insert, update, delete), got {op!r}")
    doc: dict[str, Any] = {"instant": time, "op": op, "columns": [], "rows": [], "counts": dict.fromkeys(OPS, 0),
                           "total": 0, "page": 1, "pages": 1, "per_page": per_page, "unavailable": None,
                           "source": "CDC log" if snap.meta.config.cdc_mode is not None else "inferred"}
    try:
        table = snap.cached(f"changes:{time}", lambda: read_instant_changes(snap.meta, time, snap.timeline))
    except InstantNotFoundError as exc:
        raise NotFound(str(exc)) from exc
    except HistoryUnavailableError as exc:
        doc["unavailable"] = str(exc)
        return doc
    ops = table.column("op").to_pylist()
    for o in ops:
        doc["counts"][o] += 1
    doc["columns"] = [f.name for f in table.schema.field("after").type]
    chosen = [i for i, o in enumerate(ops) if op is None or o == op]
    per_page = max(1, min(per_page, MAX_PER_PAGE))
    pages = max(1, math.ceil(len(chosen) / per_page))
    page = max(1, min(page, pages))
    picked = chosen[(page - 1) * per_page: page * per_page]
    if picked:
        import pyarrow as pa

        part = table.take(pa.array(picked, pa.int64())).to_pylist()
    else:
        part = []
    rows = []
    for r in part:
        before, after = r["before"], r["after"]
        cells = []
        for c in doc["columns"]:
            b = _cell(before.get(c)) if before is not None else None
            a = _cell(after.get(c)) if after is not None else None
            cells.append({"before": b, "after": a, "changed": before is not None and after is not None and b != a})
        rows.append({"op": r["op"], "kind": OPS[r["op"]], "cells": cells})
    doc.update({"rows": rows, "total": len(chosen), "page": page, "pages": pages, "per_page": per_page})
    return doc
