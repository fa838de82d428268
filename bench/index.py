"""Index benchmark: time to TAG one batch (find the file group of every existing key), no write.

    python -m bench.index                          # 1M rows, batch 100k, keys ordered + uuid, BLOOM + SIMPLE + HBASE
    python -m bench.index --rows 100000 --batch 10000 --repeat 1         # small, for development
    python -m bench.index --rows 10000000                                # 100 files of 100k rows
    python -m bench.index --keys uuid --indexes BLOOM,SIMPLE --hot-files 1.0
    HBASE_THRIFT_HOST=hbase.local python -m bench.index --indexes HBASE,SIMPLE   # a real HBase

For each key kind a COPY_ON_WRITE table is loaded (untimed) with `bulk_insert`, partitioned by
day with several files per day; then, for each index, the batch is tagged the way the write
executor tags an upsert (same key columns, same TagContext) and the clock covers only
`index.tag_location(ctx, records)` forced by a count of the records it tagged to a file.

Key kinds:
- ordered  zero-padded increasing ids ("000000123456"): every file holds a narrow, disjoint key
           range, so BLOOM prunes most files from their footer's min/max key alone;
- uuid     random UUIDv4 strings: every file's range covers nearly all keys, so only the bloom
           filters prune (BLOOM's weak spot).

Batch: `--batch` records, 80% keys already in the table (drawn from a random `--hot-files`
fraction of the files, so some files hold none of them) and 20% new keys on random days
(ordered: ids above every existing one; uuid: fresh UUIDs). Both key kinds use the same rows,
days and layout; only the key strings differ.

HBASE: the server is HBASE_THRIFT_HOST (HBASE_THRIFT_PORT, default 9090) when set, else the
in-memory stand-in of the tests (tests/support/hbase_server.py), started here and labelled
"HBASE (stand-in)": a pure-Python test server, so its figures say nothing about a real HBase.
The table HBASE tags is loaded with the HBASE index (every bulk insert Puts its keys into a
per-run HBase table). The stand-in takes minutes to load 1M keys, so with it the HBASE cases use
a table of `--hbase-rows` (default 200,000) rows of its own, on which SIMPLE is timed too.

See bench/README.md for the columns and caveats.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python bench/index.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import day_string, random_strings  # noqa: E402

KEY_KINDS = ("ordered", "uuid")
INDEXES = ("BLOOM", "SIMPLE", "HBASE")
BASELINE = "SIMPLE"
RECORD_KEY, PARTITION_FIELD, PRECOMBINE_FIELD = "id", "day", "ts"
KEY_WIDTH = 12  # ordered keys: zero-padded to this many digits, so string order == numeric order
RECORD_SIZE = 1024  # bytes/record the planner assumes; max file size = file rows x this
DEFAULT_FILE_ROWS = 100_000
MIN_FILES_PER_DAY = 4
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_CITIES = ["Amsterdam", "Berlin", "Lisbon", "Oslo", "Paris", "Rome", "Tokyo", "Zurich"]
STAT_COLS = ("files", "files_read", "range_pruned", "bloom_pruned", "candidates", "false_positives")
HBASE = "HBASE"
HBASE_STAND_IN_ROWS = 200_000  # default --hbase-rows with the stand-in (see --hbase-rows)
# while loading: no rate limit (the engine's default is 10,000 operations/s), 1000 rows a round trip
HBASE_LOAD_OPTIONS = {
    "hoodie.index.hbase.max.qps.per.region.server": 1_000_000_000,
    "hoodie.index.hbase.put.batch.size": 1000,
}


# ---------------------------------------------------------------------------------------
# data


def uuid_strings(rng: np.random.Generator, n: int) -> pa.Array:
    """`n` random version-4 UUID strings (lower-case hex, 8-4-4-4-12), built in Arrow buffers."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 0x0F]
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    for src, dst, width in ((0, 0, 8), (8, 9, 4), (12, 14, 4), (16, 19, 4), (20, 24, 12)):
        out[:, dst : dst + width] = hexed[:, src : src + width]
    offsets = np.arange(0, n * 36 + 1, 36, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes())).cast(
        pa.string()
    )


def ordered_strings(ids: np.ndarray) -> pa.Array:
    return pc.utf8_lpad(pa.array(ids, pa.int64()).cast(pa.string()), KEY_WIDTH, "0")


class Layout:
    """Rows 0..rows-1 in `days` partitions of `files_per_day` files of `file_rows` rows.

    Row (= ordered id) `i` is in file `g = i // file_rows`, on day `g // files_per_day`: ids
    grow with time, and each file holds one contiguous id range. Bulk-insert batch `j` holds
    file `j` of every day, so every commit writes exactly one file per partition.
    """

    def __init__(self, rows: int, days: int, file_rows: int | None, seed: int) -> None:
        if file_rows is None:
            file_rows = max(1, min(DEFAULT_FILE_ROWS, rows // (days * MIN_FILES_PER_DAY)))
        self.days = days
        self.file_rows = file_rows
        self.files_per_day = max(1, rows // (days * file_rows))
        self.n_files = days * self.files_per_day
        self.rows = self.n_files * file_rows  # rounded down to whole files
        self.requested_rows = rows
        rng = np.random.default_rng([seed, 1])
        self.uuids = uuid_strings(rng, self.rows)  # uuid key of row i

    def day_of(self, ids: np.ndarray) -> np.ndarray:
        return (ids // self.file_rows // self.files_per_day).astype(np.int64)

    def load_ids(self, j: int) -> np.ndarray:
        """Row ids of bulk-insert batch `j`: file `j` of every day."""
        return np.concatenate(
            [
                np.arange(g * self.file_rows, (g + 1) * self.file_rows)
                for g in range(j, self.n_files, self.files_per_day)
            ]
        )

    def keys(self, kind: str, ids: np.ndarray) -> pa.Array:
        return ordered_strings(ids) if kind == "ordered" else self.uuids.take(pa.array(ids))

    def describe(self) -> dict:
        return {
            "rows": self.rows,
            "requested_rows": self.requested_rows,
            "days": self.days,
            "files_per_day": self.files_per_day,
            "files": self.n_files,
            "rows_per_file": self.file_rows,
        }


def rows_table(rng: np.random.Generator, keys: pa.Array, day_idx: np.ndarray, ts_base: int) -> pa.Table:
    n = len(keys)
    days = pa.array([day_string(i) for i in range(int(day_idx.max()) + 1)], pa.string())
    return pa.table(
        {
            RECORD_KEY: keys,
            PARTITION_FIELD: days.take(pa.array(day_idx)),
            PRECOMBINE_FIELD: pa.array(ts_base + rng.integers(0, 86_400_000, n), pa.int64()),
            "name": random_strings(rng, n, 24),
            "city": pa.array(_CITIES, pa.string()).take(pa.array(rng.integers(0, len(_CITIES), n))),
            "amount": pa.array(np.round(rng.uniform(0, 10_000, n), 2), pa.float64()),
        }
    )


class Batch:
    """The batch to tag: existing keys from `hot` files + new keys, shuffled (same rows for both kinds)."""

    def __init__(
        self, layout: Layout, size: int, update_fraction: float, hot_fraction: float, seed: int
    ) -> None:
        rng = np.random.default_rng([seed, 2])
        n_upd = min(round(size * update_fraction), layout.rows)
        # enough hot files that the updates are at most half of their rows (when the table allows)
        need = math.ceil(2 * n_upd / layout.file_rows) if n_upd else 0
        n_hot = min(layout.n_files, max(1, round(hot_fraction * layout.n_files), need))
        self.hot_files = np.sort(rng.choice(layout.n_files, n_hot, replace=False))
        hot_ids = (self.hot_files[:, None] * layout.file_rows + np.arange(layout.file_rows)[None, :]).ravel()
        upd_ids = rng.choice(hot_ids, n_upd, replace=False)
        n_ins = size - n_upd
        ins_ids = np.arange(layout.rows, layout.rows + n_ins, dtype=np.int64)  # above every existing id
        ins_day = rng.integers(0, layout.days, n_ins)
        order = rng.permutation(size)
        self.ids = np.concatenate([upd_ids, ins_ids])[order]
        self.day_idx = np.concatenate([layout.day_of(upd_ids), ins_day])[order]
        self.is_update = np.concatenate([np.ones(n_upd, bool), np.zeros(n_ins, bool)])[order]
        self.new_uuids = uuid_strings(np.random.default_rng([seed, 3]), n_ins)
        self.size, self.updates, self.inserts = size, n_upd, n_ins
        self.layout = layout
        self.seed = seed

    def keys(self, kind: str) -> pa.Array:
        if kind == "ordered":
            return ordered_strings(self.ids)
        # existing rows keep their uuid; new rows get fresh ones, in batch order
        upd_pos = np.flatnonzero(self.is_update)
        ins_pos = np.flatnonzero(~self.is_update)
        keys = np.empty(self.size, dtype=object)
        keys[upd_pos] = self.layout.uuids.take(pa.array(self.ids[upd_pos])).to_numpy(zero_copy_only=False)
        keys[ins_pos] = self.new_uuids.to_numpy(zero_copy_only=False)
        return pa.array(keys, pa.string())

    def table(self, kind: str) -> pa.Table:
        return rows_table(np.random.default_rng([self.seed, 4]), self.keys(kind), self.day_idx, 10**13)

    def describe(self) -> dict:
        return {
            "batch": self.size,
            "existing_keys": self.updates,
            "new_keys": self.inserts,
            "hot_files": len(self.hot_files),
            "batch_days": len(set(self.day_idx.tolist())),
        }


# ---------------------------------------------------------------------------------------
# engine side


def load_options(layout: Layout) -> dict:
    """Writer options that make every bulk-insert commit write one file of `file_rows` per day."""
    return {
        "hoodie.parquet.max.file.size": layout.file_rows * RECORD_SIZE,
        "hoodie.copyonwrite.record.size.estimate": RECORD_SIZE,
        # never re-estimate the record size from earlier commits: files stay `file_rows` rows
        "hoodie.record.size.estimation.threshold": 1e12,
    }


def build_table(
    spark,
    layout: Layout,
    kind: str,
    work: Path,
    seed: int,
    progress: bool,
    index: str = "BLOOM",
    index_options: dict | None = None,
    suffix: str = "",
):
    """Create and load one table; (table, files per day, index puts). With index="HBASE" every
    bulk insert also Puts its keys' locations into HBase (`index_options`: hoodie.index.hbase.*)."""
    from engine.api import Table

    table = Table.create(
        spark,
        str(work / f"hudi-{kind}{suffix}"),
        name=f"bench_index_{kind}{suffix.replace('-', '_')}",
        record_key=RECORD_KEY,
        partition_fields=PARTITION_FIELD,
        precombine_field=PRECOMBINE_FIELD,
        index=index,
    )
    options = {**load_options(layout), **(index_options or {})}
    rng = np.random.default_rng([seed, 5])
    puts = 0
    for j in range(layout.files_per_day):
        ids = layout.load_ids(j)
        path = work / f"load-{kind}{suffix}-{j}.parquet"
        pq.write_table(rows_table(rng, layout.keys(kind, ids), layout.day_of(ids), 10**12), path)
        t0 = time.perf_counter()
        res = table.bulk_insert(spark.read.parquet(str(path)), options=options)
        puts += int(res.index_stats.get("update_puts", 0))
        if progress:
            extra = (
                f", {res.index_stats['update_puts']:,} {index} puts"
                if "update_puts" in res.index_stats
                else ""
            )
            print(
                f"      load {kind}{suffix} {j + 1}/{layout.files_per_day}: {len(ids):,} rows -> "
                f"{res.files_written} files{extra} in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        path.unlink()
    per_day = Counter(b.partition for b in table.file_system_view().latest_base_files())
    return table, dict(sorted(per_day.items())), puts


def prepare_records(spark, table, path: str):
    """The batch as the executor prepares it: data columns + record key + partition path, cached."""
    from pyspark import StorageLevel

    from engine.columns import KEY_COL, PART_COL
    from engine.keygen.keys import KeySpec
    from engine.write.prepare import partition_path_expr, record_key_expr

    spec = KeySpec.from_config(table.meta.config)
    df = spark.read.parquet(path)
    records = df.select(
        *[df[c] for c in df.columns],
        record_key_expr(spec).alias(KEY_COL),
        partition_path_expr(spec).alias(PART_COL),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    records.count()
    return records


def tag_context(spark, table, records):
    """(TagContext, summary seconds, view seconds), built like `WriteJob.run` builds it."""
    from engine.index.base import TagContext
    from engine.write.prepare import summarize

    t0 = time.perf_counter()
    summary = summarize(records)
    incoming = summary.keys_by_partition()
    t1 = time.perf_counter()
    view = table.meta.file_system_view()
    t2 = time.perf_counter()
    ctx = TagContext(
        spark=spark, meta=table.meta, view=view, partitions=summary.partitions, incoming_keys=incoming
    )
    return ctx, t1 - t0, t2 - t1


def new_index(name: str, options: dict | None = None, table_name: str | None = None):
    from engine.config.table_config import IndexType
    from engine.index import index_for

    return index_for(IndexType.parse(name), options, table_name)


def tag_once(index, ctx, records) -> tuple[float, int, dict]:
    """The timed part: tag, and force it by counting the records tagged to a file."""
    from pyspark.sql import functions as F

    from engine.index import FILE_ID_COL

    t0 = time.perf_counter()
    tagged = index.tag_location(ctx, records)
    found = tagged.filter(F.col(FILE_ID_COL).isNotNull()).count()
    seconds = time.perf_counter() - t0
    return seconds, found, dict(index.tagging_stats())


def check_run(index, ctx, records) -> tuple[int, int]:
    """Untimed first run (also a warm-up): (rows out of tag_location, rows tagged to a file)."""
    from pyspark.sql import functions as F

    from engine.index import FILE_ID_COL

    tagged = index.tag_location(ctx, records)
    rows = tagged.groupBy(F.col(FILE_ID_COL).isNotNull().alias("found")).count().collect()
    by = {r["found"]: r["count"] for r in rows}
    return sum(by.values()), by.get(True, 0)


# ---------------------------------------------------------------------------------------
# HBase


class HBaseTarget:
    """The HBase Thrift1 server the HBASE cases use: a real one named by HBASE_THRIFT_HOST
    (HBASE_THRIFT_PORT, default 9090), else the in-memory stand-in of the tests, started here."""

    def __init__(self) -> None:
        self.host: str | None = None
        self.port = 9090
        self.stand_in = False
        self.error: str | None = None
        self._cm = None

    @property
    def label(self) -> str:
        return "HBASE (stand-in)" if self.stand_in else "HBASE"

    def start(self) -> HBaseTarget:
        host = os.environ.get("HBASE_THRIFT_HOST", "").strip()
        if host:
            self.host, self.port = host, int(os.environ.get("HBASE_THRIFT_PORT") or 9090)
            return self
        self.stand_in = True
        try:
            root = str(Path(__file__).resolve().parents[1])
            if root not in sys.path:
                sys.path.insert(0, root)
            from tests.support.hbase_server import hbase_server

            self._cm = hbase_server()
            self.host, self.port = self._cm.__enter__()
        except Exception as exc:  # e.g. happybase / thriftpy2 not installed
            traceback.print_exc()
            self.error = f"could not start the HBase stand-in: {type(exc).__name__}: {exc}"
        return self

    def stop(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None

    def options(self, table: str, loading: bool = False) -> dict:
        """hoodie.index.hbase.* for one HBase table; `loading`: no rate limit, 1000 Puts a round trip."""
        opts = {
            "hoodie.index.hbase.thrift.host": self.host,
            "hoodie.index.hbase.thrift.port": self.port,
            "hoodie.index.hbase.table": table,
        }
        if loading:
            opts.update(HBASE_LOAD_OPTIONS)
        return opts

    def drop(self, table: str) -> None:
        """Disable and delete an HBase table this run created (best effort)."""
        from engine.index.hbase import HBaseSettings

        try:
            conn = HBaseSettings.from_options(self.options(table)).connect()
            try:
                if table.encode() in conn.tables():
                    conn.delete_table(table, disable=True)
            finally:
                conn.close()
        except Exception as exc:  # leave it; say so
            print(f"   note: could not drop HBase table {table}: {type(exc).__name__}: {exc}", flush=True)


# ---------------------------------------------------------------------------------------
# output


def _loud(msg: str) -> None:
    bar = "!" * 100
    for stream in (sys.stdout, sys.stderr):
        print(f"\n{bar}\n!!! {msg}\n{bar}\n", file=stream, flush=True)


def _fmt(value, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("pyspark", "pyarrow", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git_state() -> dict:
    """The engine's commit and whether engine/ differs from it (the numbers belong to that code)."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]

    def git(*cmd: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *cmd], cwd=repo, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    return {
        "commit": git("rev-parse", "HEAD"),
        "engine_modified": bool(git("status", "--porcelain", "engine")),
    }


def print_table(results: dict) -> None:
    head = (
        f"{'keys':<8} {'index':<16} {'rows':>9} {'seconds':>8} {'vs SIMPLE':>9} {'files':>6} {'read':>6} "
        f"{'range-pr':>8} {'bloom-pr':>8} {'candidates':>10} {'false+':>6} {'looked-up':>9} {'found':>8} "
        f"{'tagged':>8}  check"
    )
    print()
    print(head)
    print("-" * len(head))
    for kind, per_kind in results["cases"].items():
        for key, c in per_kind.items():
            label = c.get("label", key)
            rows = _fmt(c.get("table_rows"), ",")
            if "error" in c:
                print(f"{kind:<8} {label:<16} {rows:>9} {'FAILED':>8}  {c['error'][:80]}")
                continue
            s = c["stats"]
            print(
                f"{kind:<8} {label:<16} {rows:>9} {c['seconds']:>8.2f} {_fmt(c.get('vs_simple'), '.2f'):>9} "
                f"{_fmt(s.get('files')):>6} {_fmt(s.get('files_read')):>6} {_fmt(s.get('range_pruned')):>8} "
                f"{_fmt(s.get('bloom_pruned')):>8} {_fmt(s.get('candidates'), ','):>10} "
                f"{_fmt(s.get('false_positives')):>6} {_fmt(s.get('keys'), ','):>9} {_fmt(s.get('found'), ','):>8} "
                f"{c['tagged']:>8,}  {'ok' if c['ok'] else 'MISMATCH'}"
            )
    hb = results.get("hbase")
    separate = bool(hb and hb.get("separate_table"))

    def describe(lay: dict, b: dict) -> str:
        return (
            f"{lay['rows']:,} rows, {lay['days']} days x {lay['files_per_day']} files of {lay['rows_per_file']:,} rows "
            f"= {lay['files']} files; batch {b['batch']:,} = {b['existing_keys']:,} existing keys "
            f"(from {b['hot_files']} of {lay['files']} files) + {b['new_keys']:,} new keys over {b['batch_days']} day(s)"
        )

    print()
    print(f"table: {describe(results['layout'], results['batch'])}")
    if separate:
        print(f"HBASE table: {describe(hb['layout'], hb['batch'])}")
        print(
            f"  HBASE ran on this smaller table (--hbase-rows {hb['rows']:,}: {hb['rows_reason']}); the "
            f"{BASELINE} row of {hb['layout']['rows']:,} rows is {BASELINE} on that same table, HBASE's vs SIMPLE is against it"
        )
    for line in (
        "seconds: best of --repeat, tag_location + count only; vs SIMPLE: seconds / SIMPLE's seconds on the same table (< 1 = faster)",
        "files: latest base files in the touched partitions; read: files whose record-key column was read",
        "range-pr / bloom-pr: files skipped by the footer's min/max key / by its bloom filter",
        "candidates: keys that passed both and were looked up in a file; false+: candidates not in that file",
        "looked-up / found (HBASE): keys looked up in HBase / found there with a committed location",
        "tagged: records found in a file (must equal the existing keys in the batch); '-': not reported by that index",
    ):
        print(line)
    if hb:
        print(
            f"HBASE server: {hb['server']}; tagging with get.batch.size {hb['tag_get_batch_size']} and "
            f"max.qps.per.region.server {hb['tag_max_qps']:,} (engine defaults)"
        )
        if hb.get("stand_in"):
            print(
                "HBASE (stand-in): the in-memory pure-Python Thrift test server of tests/support/hbase_server.py, "
                "run inside this\n  benchmark's process on the same cores. Its seconds measure that test server, "
                "NOT HBase: they say nothing\n  about a real HBase (set HBASE_THRIFT_HOST to measure one)."
            )


# ---------------------------------------------------------------------------------------


def _csv(value: str, allowed: tuple[str, ...] | None, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if allowed is not None:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise SystemExit(f"unknown {what}: {', '.join(bad)} (use {', '.join(allowed)})")
    return items


def run_case(spark, table, records, batch: Batch, name: str, repeat: int, options=None) -> dict:
    """Check run + `repeat` timed runs of one index on one prepared batch; the case's record."""
    ctx, summary_s, view_s = tag_context(spark, table, records)
    touched = len(ctx.view.latest_base_files(ctx.partitions))
    total, found = check_run(new_index(name, options, table.config.name), ctx, records)
    runs = []
    for _ in range(repeat):
        ctx, _s, _v = tag_context(spark, table, records)
        gc.collect()
        runs.append(tag_once(new_index(name, options, table.config.name), ctx, records))
    best = min(runs, key=lambda r: r[0])
    stats = dict(best[2])
    if not stats:  # SIMPLE (or a fallback): reads the key column of every touched file
        stats = {"files": touched, "files_read": touched}
    counts = [r[1] for r in runs]
    ok = total == batch.size and found == batch.updates and all(c == batch.updates for c in counts)
    return {
        "seconds": round(best[0], 3),
        "all_seconds": [round(r[0], 3) for r in runs],
        "summary_seconds": round(summary_s, 3),
        "view_seconds": round(view_s, 3),
        "touched_partitions": len(ctx.partitions),
        "touched_files": touched,
        "stats": stats,
        "index_stats": best[2],
        "tagged": best[1],
        "tagged_all_runs": counts,
        "rows_out": total,
        "check_tagged": found,
        "expected_tagged": batch.updates,
        "ok": ok,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows in the table (default 1,000,000)")
    ap.add_argument(
        "--batch", type=int, default=100_000, help="records in the batch to tag (default 100,000)"
    )
    ap.add_argument("--days", type=int, default=10, help="day partitions (default 10)")
    ap.add_argument(
        "--file-rows",
        type=int,
        default=None,
        help=f"rows per file (default: {DEFAULT_FILE_ROWS:,}, or fewer so each day has >= {MIN_FILES_PER_DAY} files)",
    )
    ap.add_argument(
        "--update-fraction", type=float, default=0.8, help="share of the batch with existing keys"
    )
    ap.add_argument(
        "--hot-files",
        type=float,
        default=0.25,
        help="fraction of the files the existing keys are drawn from (default 0.25; 1.0 = uniform)",
    )
    ap.add_argument("--keys", default=",".join(KEY_KINDS), help="key kinds: ordered,uuid")
    ap.add_argument("--indexes", default=",".join(INDEXES), help=f"index types (default {','.join(INDEXES)})")
    ap.add_argument(
        "--hbase-rows",
        type=int,
        default=None,
        help=f"rows of the table the HBASE cases use (default: {HBASE_STAND_IN_ROWS:,} with the stand-in, "
        "--rows with a real HBase; never more than --rows). A smaller table than --rows gets its own "
        "table and batch, and SIMPLE is also timed on it for the ratio",
    )
    ap.add_argument("--repeat", type=int, default=3, help="best of K timed runs per case (default 3)")
    ap.add_argument("--json", default=None, help="result file (default bench/results/index-<rows>.json)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--workdir", default=None, help="where the tables go (default: a temp dir, removed at the end)"
    )
    ap.add_argument("--progress", action="store_true", help="print the load steps")
    args = ap.parse_args(argv)

    kinds = _csv(args.keys, KEY_KINDS, "key kind")
    indexes = [i.upper() for i in _csv(args.indexes, None, "index")]
    if BASELINE not in indexes:
        print(f"note: {BASELINE} is not in --indexes, so there is no 'vs SIMPLE' ratio", flush=True)
    if args.rows < args.days or args.batch < 1 or args.repeat < 1 or not 0 <= args.update_fraction <= 1:
        raise SystemExit("need rows >= days, batch >= 1, repeat >= 1, 0 <= update fraction <= 1")
    if args.hbase_rows is not None and args.hbase_rows < args.days:
        raise SystemExit("need --hbase-rows >= days")
    out_path = (
        Path(args.json)
        if args.json
        else Path(__file__).resolve().parent / "results" / f"index-{args.rows}.json"
    )

    t_gen = time.perf_counter()
    layout = Layout(args.rows, args.days, args.file_rows, args.seed)
    batch = Batch(layout, args.batch, args.update_fraction, args.hot_files, args.seed)
    print(
        f"== table {layout.rows:,} rows: {layout.days} days x {layout.files_per_day} files x "
        f"{layout.file_rows:,} rows; batch {batch.size:,} = {batch.updates:,} existing "
        f"(from {len(batch.hot_files)} hot files) + {batch.inserts:,} new; generated in "
        f"{time.perf_counter() - t_gen:.1f}s",
        flush=True,
    )
    if layout.rows != args.rows:
        print(f"   (rows rounded down from {args.rows:,} to whole files)", flush=True)
    git_start = _git_state()
    print(
        f"== engine: commit {str(git_start['commit'])[:12]}"
        + (" + uncommitted changes in engine/" if git_start["engine_modified"] else ""),
        flush=True,
    )

    # --- HBase: the server, and the table size its cases use
    hbase: HBaseTarget | None = None
    hbase_error: str | None = None
    hb_layout, hb_batch = layout, batch
    separate = False
    if HBASE in indexes:
        hbase = HBaseTarget().start()
        if hbase.error:
            hbase_error = hbase.error
            _loud(f"HBASE cases skipped: {hbase_error}")
        else:
            if args.hbase_rows is not None:
                hb_rows, reason = args.hbase_rows, "given"
            elif hbase.stand_in:
                hb_rows, reason = (
                    HBASE_STAND_IN_ROWS,
                    "the default with the stand-in, which takes minutes to load 1M keys",
                )
            else:
                hb_rows, reason = args.rows, "a real HBase: same as --rows"
            if hb_rows > args.rows:
                hb_rows, reason = args.rows, f"{reason}, capped at --rows"
            separate = hb_rows != args.rows
            if separate:
                hb_layout = Layout(hb_rows, args.days, args.file_rows, args.seed)
                hb_batch = Batch(hb_layout, args.batch, args.update_fraction, args.hot_files, args.seed)
            server = (
                f"in-memory stand-in (tests/support/hbase_server.py) at {hbase.host}:{hbase.port} -- a pure-Python "
                "test server, its figures say nothing about a real HBase"
                if hbase.stand_in
                else f"{hbase.host}:{hbase.port} (HBASE_THRIFT_HOST)"
            )
            print(f"== HBASE: {server}", flush=True)
            if separate:
                print(
                    f"== HBASE cases on a separate table of {hb_layout.rows:,} rows (--hbase-rows: {reason}): "
                    f"{hb_layout.days} days x {hb_layout.files_per_day} files x {hb_layout.file_rows:,} rows; "
                    f"batch {hb_batch.size:,} = {hb_batch.updates:,} existing (from {len(hb_batch.hot_files)} hot "
                    f"files) + {hb_batch.inserts:,} new; {BASELINE} is timed on it too",
                    flush=True,
                )

    # what runs on which table, per key kind
    use_hbase = hbase is not None and hbase_error is None
    groups: list[dict] = []
    main_names = [n for n in indexes if n != HBASE or (use_hbase and not separate)]
    if main_names:
        groups.append(
            {
                "suffix": "",
                "layout": layout,
                "batch": batch,
                "names": main_names,
                "hbase": use_hbase and not separate,
            }
        )
    if use_hbase and separate:
        names = [HBASE] + ([BASELINE] if BASELINE in indexes else [])
        groups.append(
            {"suffix": "-hbase", "layout": hb_layout, "batch": hb_batch, "names": names, "hbase": True}
        )

    from engine.spark.session import build_session

    spark = build_session(
        args.master,
        app_name="bench-index",
        conf={"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false"},
    )
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-index-"))
    root.mkdir(parents=True, exist_ok=True)
    conf = spark.sparkContext.getConf()
    results: dict = {
        "benchmark": "index",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": vars(args),
        "indexes": indexes,
        "layout": layout.describe(),
        "batch": batch.describe(),
        "load_options": load_options(layout),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "versions": _versions(),
        "git": {"start": git_start},
        "spark_conf": {
            **{
                k: conf.get(k, None)
                for k in (
                    "spark.master",
                    "spark.driver.memory",
                    "spark.sql.shuffle.partitions",
                    "spark.sql.adaptive.enabled",
                )
            },
            "defaultParallelism": spark.sparkContext.defaultParallelism,
        },
        "tables": {},
        "cases": {},
    }
    if hbase is not None:
        from engine.index.hbase import HBaseSettings

        tag_settings = HBaseSettings.from_options(hbase.options("t")) if use_hbase else None
        results["hbase"] = {
            "server": (
                "error"
                if not use_hbase
                else "stand-in (tests/support/hbase_server.py, in-memory, pure Python, in this process)"
                if hbase.stand_in
                else f"{hbase.host}:{hbase.port} (HBASE_THRIFT_HOST)"
            ),
            "stand_in": hbase.stand_in,
            "error": hbase_error,
            "note": (
                "the stand-in is a pure-Python test server: its figures say nothing about a real HBase"
                if hbase.stand_in
                else None
            ),
            "rows": hb_layout.rows if use_hbase else None,
            "rows_reason": reason if use_hbase else None,
            "separate_table": separate,
            "layout": hb_layout.describe(),
            "batch": hb_batch.describe(),
            "load_index_options": HBASE_LOAD_OPTIONS,
            "tag_get_batch_size": tag_settings.get_batch_size if tag_settings else None,
            "tag_max_qps": tag_settings.max_qps if tag_settings else None,
        }
    failed = hbase_error is not None
    try:
        for kind in kinds:
            per_kind: dict = {}
            results["cases"][kind] = per_kind
            if hbase_error:
                per_kind[HBASE] = {"label": hbase.label, "error": hbase_error}
            for g in groups:
                g_layout, g_batch, suffix = g["layout"], g["batch"], g["suffix"]
                hb_table = hb_tag_options = None

                def key_of(name: str, g: dict = g) -> str:
                    """Case key: the index name; SIMPLE on a separate HBASE table: SIMPLE@<rows>."""
                    return name if not g["suffix"] or name == HBASE else f"{name}@{g['layout'].rows}"

                def label_of(name: str) -> str:
                    return hbase.label if name == HBASE else name

                if g["hbase"]:
                    hb_table = (
                        f"bench_index_{kind}_{g_layout.rows}_{os.getpid()}_{time.strftime('%Y%m%d%H%M%S')}"
                    )
                    hb_tag_options = hbase.options(hb_table)
                try:
                    t0 = time.perf_counter()
                    table, per_day, puts = build_table(
                        spark,
                        g_layout,
                        kind,
                        root,
                        args.seed,
                        args.progress,
                        index=HBASE if g["hbase"] else "BLOOM",
                        index_options=hbase.options(hb_table, loading=True) if g["hbase"] else None,
                        suffix=suffix,
                    )
                    load_s = time.perf_counter() - t0
                except Exception as exc:
                    traceback.print_exc()
                    for name in g["names"]:
                        per_kind[key_of(name)] = {
                            "label": label_of(name),
                            "table_rows": g_layout.rows,
                            "error": f"load failed: {type(exc).__name__}: {exc}",
                        }
                    _loud(f"{kind}{suffix}: loading the table FAILED: {exc}")
                    failed = True
                    if hb_table:
                        hbase.drop(hb_table)
                    continue
                files_total = sum(per_day.values())
                print(
                    f"   {kind}{suffix}: loaded {g_layout.rows:,} rows = {files_total} files in "
                    f"{g_layout.files_per_day} bulk inserts, {load_s:.1f}s"
                    + (f" (index HBASE: {puts:,} keys Put into {hb_table})" if g["hbase"] else ""),
                    flush=True,
                )
                if set(per_day.values()) != {g_layout.files_per_day} or len(per_day) != g_layout.days:
                    _loud(
                        f"{kind}{suffix}: unexpected layout, files per day = {per_day} "
                        f"(expected {g_layout.files_per_day} each)"
                    )
                if g["hbase"] and puts != g_layout.rows:
                    failed = True
                    _loud(
                        f"{kind}{suffix}: the loads Put {puts:,} keys into HBase, expected {g_layout.rows:,}"
                    )
                table_info = {
                    "rows": g_layout.rows,
                    "load_seconds": round(load_s, 2),
                    "files_per_day": per_day,
                }
                if g["hbase"]:
                    table_info.update({"hbase_table": hb_table, "hbase_puts": puts})
                results["tables"][kind + suffix] = table_info
                batch_path = root / f"batch-{kind}{suffix}.parquet"
                pq.write_table(g_batch.table(kind), batch_path)
                records = prepare_records(spark, table, str(batch_path))
                for name in g["names"]:
                    key, label = key_of(name), label_of(name)
                    try:
                        case = run_case(
                            spark,
                            table,
                            records,
                            g_batch,
                            name,
                            args.repeat,
                            hb_tag_options if name == HBASE else None,
                        )
                    except Exception as exc:  # keep the other cases' numbers
                        traceback.print_exc()
                        per_kind[key] = {
                            "label": label,
                            "table_rows": g_layout.rows,
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                        _loud(f"{kind}/{label} FAILED: {exc}")
                        failed = True
                        continue
                    case = {"label": label, "table_rows": g_layout.rows, "table": kind + suffix, **case}
                    if name == HBASE:
                        case["hbase_table"] = hb_table
                        case["hbase_server"] = "stand-in" if hbase.stand_in else f"{hbase.host}:{hbase.port}"
                    per_kind[key] = case
                    print(
                        f"   {kind:<8} {label:<16} {g_layout.rows:>9,} rows  best {case['seconds']:6.2f}s of "
                        f"{case['all_seconds']} tagged={case['tagged']:,} stats={case['index_stats'] or '-'}"
                        + ("" if case["ok"] else "  <-- MISMATCH"),
                        flush=True,
                    )
                    if not case["ok"]:
                        failed = True
                        _loud(
                            f"TAG COUNT MISMATCH: {kind}/{label}: tagged {case['tagged_all_runs']} (check run "
                            f"{case['check_tagged']:,} of {case['rows_out']:,} rows), expected "
                            f"{g_batch.updates:,} existing keys of {g_batch.size:,} records"
                        )
                base = per_kind.get(key_of(BASELINE), {}).get("seconds")
                for name in g["names"]:
                    c = per_kind.get(key_of(name), {})
                    if base and "seconds" in c:
                        c["vs_simple"] = round(c["seconds"] / base, 3)
                records.unpersist()
                batch_path.unlink()
                shutil.rmtree(root / f"hudi-{kind}{suffix}", ignore_errors=True)
                if hb_table:
                    hbase.drop(hb_table)
                gc.collect()
    finally:
        spark.stop()
        if hbase is not None:
            hbase.stop()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)

    results["host"]["load_avg_end"] = os.getloadavg()
    results["git"]["end"] = git_end = _git_state()
    if git_end != git_start or git_end["engine_modified"]:
        print(
            f"note: engine/ was not at one clean commit for the whole run (start {git_start}, end {git_end})",
            flush=True,
        )
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["all_ok"] = not failed
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print_table(results)
    print(f"results: {out_path}")
    if failed:
        _loud("at least one case failed or tagged a different number of records than expected (see above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
