"""Helpers for integration tests: exact rows of DataFrames, byte snapshots of table folders."""

from __future__ import annotations

from pathlib import Path

from engine.constants import META_COLUMNS


def rows(df, drop_meta: bool = False) -> list[dict]:
    """All rows of a Spark DataFrame as dicts, sorted by (partition path, record key) or by all values."""
    out = [r.asDict(recursive=True) for r in df.collect()]
    if drop_meta:
        out = [{k: v for k, v in r.items() if k not in META_COLUMNS} for r in out]
        return sorted(out, key=lambda r: tuple(str(v) for v in r.values()))
    return sorted(out, key=lambda r: (r["_hoodie_partition_path"] or "", r["_hoodie_record_key"], r["_hoodie_commit_seqno"]))


def data_rows(df) -> list[dict]:
    return rows(df, drop_meta=True)


LOCK_DIR = ".hoodie/.lock/"
FAILED_WRITES_DIR = ".hoodie/.failed_writes/"


def tree_bytes(path: str | Path, include_lock: bool = False) -> dict[str, bytes]:
    """Every file under `path` (relative name -> bytes), for byte-identical before/after checks.

    Left out unless asked for (`include_lock`), as service bookkeeping that no reader reads:
    the table lock's lease files (`.hoodie/.lock/`: every write takes the lock, also one that
    then fails on bad input, and leaves its released lease behind), and the record a write that
    failed after claiming its instant keeps of itself (`.hoodie/.failed_writes/<instant>`, see
    `engine.table.failed_writes`; tests/integration/test_table_isolation.py checks it exactly).
    """
    base = Path(path)
    out = {}
    for p in sorted(base.rglob("*")):
        rel = p.relative_to(base).as_posix()
        if p.is_file() and (include_lock or not rel.startswith((LOCK_DIR, FAILED_WRITES_DIR))):
            out[rel] = p.read_bytes()
    return out


def tree_dirs(path: str | Path) -> list[str]:
    """Every folder under `path`, but the failed-write records' (see `tree_bytes`)."""
    base = Path(path)
    return sorted(rel for p in base.rglob("*") if p.is_dir()
                  and (rel := p.relative_to(base).as_posix()) != FAILED_WRITES_DIR.rstrip("/"))
