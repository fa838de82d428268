"""Seeded synthetic data for the benchmarks: a base table and one upsert batch per workload.

Every row has the same shape:

    id      int64   record key (unique)
    day     string  partition value, "YYYY-MM-DD", 100 distinct days in the base table
    ts      int64   precombine field (epoch milliseconds)
    name    string  24 random alphanumeric characters
    city    string  one of 64 names (6-14 characters)
    note    string  40 random alphanumeric characters
    amount  double
    score   double

about 110 bytes per row uncompressed (random strings barely compress).

Workloads (see `make_workload`):

- ``uniform``: `day` is drawn uniformly per row, so every day partition holds keys from the
  whole id range. The batch updates keys drawn uniformly from the whole table (80%) and
  inserts new keys (20%) into random existing days.
- ``recent``: ids grow with time (row `i` lives on day `i * 100 // rows`), like an
  append-mostly event table. The batch updates keys of the latest 3 days only and inserts new
  keys into "today" (a 101st day). The update share is 80% of the batch, capped at half of the
  rows held by the latest 3 days (at 1M rows those days hold 30,000 rows, so the batch is
  15,000 updates + 85,000 inserts; at 10M rows it is 80,000 + 20,000).

Every batch timestamp is >= `Workload.batch_ts_min`, and every base timestamp is below it, so
"rows with ts >= batch_ts_min" counts the batch rows visible after an upsert.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

N_DAYS = 100
FIRST_DAY = _dt.date(2024, 1, 1)
DAY_MS = 86_400_000
RECENT_DAYS = 3
UPDATE_FRACTION = 0.8
_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
_CITIES = [
    "Amsterdam", "Athens", "Auckland", "Bangkok", "Barcelona", "Berlin", "Bogota", "Boston",
    "Brussels", "Budapest", "Cairo", "Chicago", "Copenhagen", "Dakar", "Delhi", "Dublin",
    "Edinburgh", "Florence", "Geneva", "Hamburg", "Hanoi", "Helsinki", "Istanbul", "Jakarta",
    "Kyiv", "Lagos", "Lima", "Lisbon", "London", "Madrid", "Manila", "Melbourne",
    "MexicoCity", "Milan", "Montreal", "Moscow", "Mumbai", "Munich", "Nairobi", "Naples",
    "Oslo", "Paris", "Prague", "Quito", "Reykjavik", "Riga", "Rome", "Santiago",
    "SaoPaulo", "Seoul", "Shanghai", "Singapore", "Sofia", "Stockholm", "Sydney", "Taipei",
    "Tallinn", "Tokyo", "Toronto", "Valencia", "Vienna", "Vilnius", "Warsaw", "Zurich",
]

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("day", pa.string()),
        ("ts", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("note", pa.string()),
        ("amount", pa.float64()),
        ("score", pa.float64()),
    ]
)
RECORD_KEY = "id"
PARTITION_FIELD = "day"
PRECOMBINE_FIELD = "ts"
WORKLOADS = ("uniform", "recent")


def day_string(i: int) -> str:
    return (FIRST_DAY + _dt.timedelta(days=int(i))).isoformat()


def day_start_ms(i: int) -> int:
    return int(_dt.datetime.combine(FIRST_DAY, _dt.time(), tzinfo=_dt.UTC).timestamp() * 1000) + int(i) * DAY_MS


def random_strings(rng: np.random.Generator, n: int, length: int) -> pa.Array:
    """`n` random alphanumeric strings of `length` characters, built straight into Arrow buffers."""
    data = _ALPHABET[rng.integers(0, len(_ALPHABET), size=n * length, dtype=np.uint8)]
    offsets = np.arange(0, n * length + 1, length, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data)).cast(pa.string())


def _take_strings(values: list[str], idx: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(idx))


def make_rows(rng: np.random.Generator, ids: np.ndarray, day_idx: np.ndarray, ts: np.ndarray) -> pa.Table:
    """Rows with the given keys, day indexes and timestamps, and fresh random payload."""
    n = len(ids)
    days = [day_string(i) for i in range(int(day_idx.max()) + 1)] if n else []
    return pa.Table.from_arrays(
        [
            pa.array(ids, pa.int64()),
            _take_strings(days, day_idx) if n else pa.array([], pa.string()),
            pa.array(ts, pa.int64()),
            random_strings(rng, n, 24),
            _take_strings(_CITIES, rng.integers(0, len(_CITIES), n)),
            random_strings(rng, n, 40),
            pa.array(np.round(rng.uniform(0, 10_000, n), 2), pa.float64()),
            pa.array(rng.standard_normal(n), pa.float64()),
        ],
        schema=SCHEMA,
    )


@dataclass(frozen=True)
class Workload:
    name: str
    rows: int
    base: pa.Table  # the initial table
    batch: pa.Table  # the upsert batch (unique ids, updates and inserts shuffled together)
    updates: int
    inserts: int
    batch_ts_min: int  # every batch ts >= this > every base ts
    seed: int

    @property
    def expected_rows_after(self) -> int:
        return self.rows + self.inserts

    def describe(self) -> dict:
        return {
            "workload": self.name,
            "rows": self.rows,
            "batch": self.batch.num_rows,
            "updates": self.updates,
            "inserts": self.inserts,
            "base_days": N_DAYS,
            "batch_days": len(set(self.batch.column(PARTITION_FIELD).to_pylist())),
            "expected_rows_after": self.expected_rows_after,
            "base_arrow_bytes": self.base.nbytes,
            "seed": self.seed,
        }


def make_workload(name: str, rows: int, batch: int, seed: int = 42) -> Workload:
    """The base table and the upsert batch of workload `name` ("uniform" or "recent")."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r} (expected one of {', '.join(WORKLOADS)})")
    if rows < N_DAYS or batch < 1:
        raise ValueError("need rows >= 100 and batch >= 1")
    rng = np.random.default_rng([seed, WORKLOADS.index(name)])
    ids = np.arange(rows, dtype=np.int64)
    if name == "uniform":
        base_day = rng.integers(0, N_DAYS, rows).astype(np.int32)
    else:
        base_day = (ids * N_DAYS // rows).astype(np.int32)
    starts = np.array([day_start_ms(i) for i in range(N_DAYS + 1)], dtype=np.int64)
    base_ts = starts[base_day] + rng.integers(0, DAY_MS, rows)
    base = make_rows(rng, ids, base_day, base_ts)

    # every batch timestamp is later than all base timestamps (so Hudi's precombine keeps them)
    batch_ts_min = day_start_ms(N_DAYS)
    if name == "uniform":
        n_upd = min(round(batch * UPDATE_FRACTION), rows)
        upd_ids = np.sort(rng.choice(rows, n_upd, replace=False)).astype(np.int64)
        n_ins = batch - n_upd
        ins_day = rng.integers(0, N_DAYS, n_ins).astype(np.int32)
    else:
        first_recent = int(np.searchsorted(base_day, N_DAYS - RECENT_DAYS))
        recent_rows = rows - first_recent
        n_upd = min(round(batch * UPDATE_FRACTION), recent_rows // 2)
        upd_ids = np.sort(first_recent + rng.choice(recent_rows, n_upd, replace=False)).astype(np.int64)
        n_ins = batch - n_upd
        ins_day = np.full(n_ins, N_DAYS, dtype=np.int32)  # "today"
    ins_ids = np.arange(rows, rows + n_ins, dtype=np.int64)
    b_ids = np.concatenate([upd_ids, ins_ids])
    b_day = np.concatenate([base_day[upd_ids], ins_day])  # an update keeps its key's partition
    b_ts = batch_ts_min + rng.integers(0, DAY_MS, n_upd + n_ins)
    order = rng.permutation(n_upd + n_ins)
    batch_tbl = make_rows(rng, b_ids[order], b_day[order], b_ts[order])
    return Workload(name, rows, base, batch_tbl, n_upd, n_ins, batch_ts_min, seed)


__all__ = [
    "N_DAYS",
    "PARTITION_FIELD",
    "PRECOMBINE_FIELD",
    "RECORD_KEY",
    "SCHEMA",
    "WORKLOADS",
    "Workload",
    "day_string",
    "make_rows",
    "make_workload",
    "random_strings",
]
