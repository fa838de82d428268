"""RECORD index files: names, entries, the per-bucket state, merging and point lookups (no pyspark).

Layout, all in `.hoodie/.record_index/` (a folder Hudi readers skip: they list `.hoodie/` for
timeline files only):

    b00003_20240101120000000.arrow            entries one write instant put in bucket 3 ("delta")
    b00003_20240101130000123.base.arrow       bucket 3 merged by the compaction of that instant
    20240101130000123.compaction.requested    a compaction's plan (JSON)
    20240101130000123.compaction              the same plan, written once every base file exists

An index file is an Arrow IPC file (uncompressed, memory-mapped when local) of ENTRY_SCHEMA
rows sorted by (hash, key): `hash` is the bucketing hash of the key (int32), so a lookup is a
numpy binary search of the probe hashes over that column, then a comparison of the keys.

Which files count (`resolve_state`), for a caller's timeline:
- a compaction counts if its completed marker exists and every instant it covers is valid on
  that timeline (a reader whose timeline predates the compaction's newest input, or a rollback
  of one of its inputs' instants, reads its inputs instead);
- a delta counts if its instant is a valid (completed) instant on the timeline and no counting
  compaction lists it as an input;
- a base counts if its compaction counts; per bucket the newest one wins;
- newest wins across a bucket's files: deltas by instant, newest first, then the base (whose
  entries all predate its compaction). A tombstone (`deleted`) means absent.
Everything else is an orphan: the leftovers of a failed write or an interrupted compaction, and
files superseded by a completed compaction. Orphans never change a lookup; the next write
deletes them (markers last, so that a crash mid-cleanup leaves a consistent folder), except
superseded files younger than `hoodie.record.index.superseded.retain.seconds` (600): a lookup
that listed the folder before the compaction still reads them.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import METAFOLDER
from engine.errors import CorruptTableError
from engine.keygen.record_hash import HashFunction, java_hash_array
from engine.storage import Storage

INDEX_FOLDER = f"{METAFOLDER}/.record_index"
EXTENSION = ".arrow"
EXTENSIONS = (".arrow", ".parquet")  # parquet: only the benchmark's comparison copies
REQUESTED_SUFFIX = ".compaction.requested"
COMPLETED_SUFFIX = ".compaction"

ENTRY_SCHEMA = pa.schema(
    [
        pa.field("hash", pa.int32(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("partition", pa.dictionary(pa.int32(), pa.string())),
        pa.field("file_id", pa.dictionary(pa.int32(), pa.string())),
        pa.field("instant", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("deleted", pa.bool_(), nullable=False),
    ]
)
# what a lookup returns: the key, the partition and file id holding it
FOUND_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])

_NAME = re.compile(r"^b(\d{5})_(\d{17})(\.base)?(\.arrow|\.parquet)$")


@dataclass(frozen=True, order=True)
class IndexFile:
    """One index file: a write instant's entries of a bucket (delta) or a compaction's base."""

    bucket: int
    instant: str
    is_base: bool = False
    extension: str = EXTENSION

    @property
    def name(self) -> str:
        return f"b{self.bucket:05d}_{self.instant}{'.base' if self.is_base else ''}{self.extension}"

    @property
    def path(self) -> str:
        """Relative to the table root."""
        return f"{INDEX_FOLDER}/{self.name}"

    @classmethod
    def parse(cls, name: str) -> IndexFile | None:
        """Parse an index file name; None for anything else (markers, temporary files)."""
        m = _NAME.match(name)
        if m is None:
            return None
        return cls(int(m.group(1)), m.group(2), m.group(3) is not None, m.group(4))


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction merges: per bucket, the input file names and the newest instant they
    cover (`covers`; rolling back an instant at or before it needs the bucket rebuilt)."""

    instant: str
    inputs: Mapping[int, tuple[str, ...]]
    covers: Mapping[int, str]

    def base(self, bucket: int) -> IndexFile:
        return IndexFile(bucket, self.instant, is_base=True)

    def to_bytes(self) -> bytes:
        doc = {
            "instant": self.instant,
            "buckets": {str(b): {"inputs": list(self.inputs[b]), "covers": self.covers[b]} for b in sorted(self.inputs)},
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactionPlan:
        try:
            doc = json.loads(data)
            buckets = doc["buckets"]
            return cls(
                doc["instant"],
                {int(b): tuple(v["inputs"]) for b, v in buckets.items()},
                {int(b): str(v["covers"]) for b, v in buckets.items()},
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTableError(f"record index compaction plan is not valid JSON of a plan: {exc}") from exc


@dataclass
class BucketState:
    """The files a lookup in one bucket reads: deltas newest first, then the base."""

    bucket: int
    base: IndexFile | None = None
    covers: str | None = None  # the base's newest covered instant
    deltas: list[IndexFile] = field(default_factory=list)

    @property
    def sources(self) -> list[IndexFile]:
        return self.deltas + ([self.base] if self.base is not None else [])

    @property
    def file_count(self) -> int:
        return len(self.sources)


@dataclass
class IndexState:
    """The valid files of every bucket, and the orphans a cleanup may delete (file names).

    `superseded_by`: orphan files that a completed compaction merged (name -> that compaction's
    instant); a cleanup may keep them for a while, for lookups that listed the folder before the
    compaction completed. `marker_files`: the files each completed marker among the orphan
    markers vouches for (a marker must outlive every one of them)."""

    buckets: dict[int, BucketState]
    orphan_files: list[str]
    orphan_markers: list[str]
    superseded_by: dict[str, str] = field(default_factory=dict)
    marker_files: dict[str, set[str]] = field(default_factory=dict)

    def bucket(self, b: int) -> BucketState:
        return self.buckets.get(b) or BucketState(b)

    @property
    def is_empty(self) -> bool:
        return not any(s.sources for s in self.buckets.values())


def resolve_state(
    names: Iterable[str],
    completed: Mapping[str, CompactionPlan],
    is_valid: Callable[[str], bool],
    before: str | None = None,
) -> IndexState:
    """The index state from the folder's file names (pure).

    `completed`: the plans of compactions whose completed marker exists. `is_valid(instant)`: the
    write instant completed (or predates an archived timeline). `before`: delta files of invalid
    instants count as orphans only when older than this (the instant being written; None: all).
    """
    names = list(names)
    files = [f for f in (IndexFile.parse(n) for n in names) if f is not None]
    # a completed compaction counts only if every instant it covers is valid for the caller: a
    # reader whose timeline predates one of them (or an instant being rolled back) reads the
    # compaction's inputs instead, which match its timeline
    every = dict(completed)
    completed = {
        i: plan for i, plan in every.items() if all(not c or is_valid(c) for c in plan.covers.values())
    }
    superseded_by: dict[str, str] = {}
    for inst, merged in sorted(completed.items()):  # the oldest compaction that merged a file
        for ins in merged.inputs.values():
            for name in ins:
                superseded_by.setdefault(name, inst)
    superseded = set(superseded_by)
    buckets: dict[int, BucketState] = {}
    orphans: list[str] = []
    current_bases: set[str] = set()
    # bases: the newest completed compaction of each bucket
    for f in sorted((f for f in files if f.is_base), key=lambda f: f.instant, reverse=True):
        plan = completed.get(f.instant)
        state = buckets.setdefault(f.bucket, BucketState(f.bucket))
        if plan is None or f.bucket not in plan.inputs or f.name in superseded or state.base is not None:
            orphans.append(f.name)
            continue
        state.base, state.covers = f, plan.covers[f.bucket]
        current_bases.add(f.name)
    for f in sorted((f for f in files if not f.is_base), key=lambda f: f.instant, reverse=True):
        if f.name in superseded:
            orphans.append(f.name)
        elif is_valid(f.instant):
            buckets.setdefault(f.bucket, BucketState(f.bucket)).deltas.append(f)
        elif before is None or f.instant < before:
            orphans.append(f.name)
    existing_after = set(names) - set(orphans)
    markers: list[str] = []
    for name in names:
        if name.endswith(REQUESTED_SUFFIX):
            instant = name[: -len(REQUESTED_SUFFIX)]
            if instant not in completed:  # interrupted or ignored: its bases are orphans above
                markers.append(name)
            elif not _plan_files(completed[instant]) & existing_after:
                markers.append(name)
    for instant, plan in completed.items():
        if not _plan_files(plan) & existing_after:  # nothing left it could vouch for
            markers.append(instant + COMPLETED_SUFFIX)
    present = set(names)
    vouches = {instant + COMPLETED_SUFFIX: _plan_files(plan) & present for instant, plan in completed.items()}
    for instant, plan in every.items():
        if instant not in completed:
            # covers an instant that is not valid for the caller: for the writer (whose timeline
            # is the newest) one that was rolled back, so this compaction never counts again
            markers.append(instant + COMPLETED_SUFFIX)
            vouches[instant + COMPLETED_SUFFIX] = {plan.base(b).name for b in plan.inputs} & present
    return IndexState(
        buckets,
        sorted(orphans),
        sorted(markers),
        {n: superseded_by[n] for n in orphans if n in superseded_by},
        vouches,
    )


def _plan_files(plan: CompactionPlan) -> set[str]:
    out = {plan.base(b).name for b in plan.inputs}
    out.update(n for ins in plan.inputs.values() for n in ins)
    return out


# ---- storage ----------------------------------------------------------------------------
def list_index(storage: Storage) -> tuple[list[str], dict[str, CompactionPlan]]:
    """The index folder's file names and the plans of its completed compactions."""
    names = [f.name for f in storage.list_dir(INDEX_FOLDER) if not f.is_dir]
    completed = {}
    for name in names:
        if name.endswith(COMPLETED_SUFFIX):
            plan = CompactionPlan.from_bytes(storage.read_bytes(f"{INDEX_FOLDER}/{name}"))
            completed[plan.instant] = plan
    return names, completed


def entries_table(
    keys: pa.Array, partitions: pa.Array, file_ids: pa.Array, instants: pa.Array, deleted: pa.Array,
    hasher: HashFunction = java_hash_array, hashes: np.ndarray | None = None,
) -> pa.Table:
    """ENTRY_SCHEMA rows sorted by (hash, key)."""
    h = hasher(keys) if hashes is None else hashes
    table = pa.table(
        [
            pa.array(np.asarray(h, dtype=np.int64).astype(np.int32), pa.int32()),
            keys.cast(pa.string()),
            _dict(partitions),
            _dict(file_ids),
            _dict(instants),
            deleted.cast(pa.bool_()),
        ],
        schema=ENTRY_SCHEMA,
    )
    return table.sort_by([("hash", "ascending"), ("key", "ascending")])


def _dict(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.cast(pa.string())
    return pc.dictionary_encode(values.cast(pa.string())).cast(pa.dictionary(pa.int32(), pa.string()))


def write_entries(storage: Storage, index_file: IndexFile, table: pa.Table) -> int:
    """Write `table` (ENTRY_SCHEMA, sorted) as `index_file`, atomically; returns its size in bytes."""
    table = table.cast(ENTRY_SCHEMA).combine_chunks()
    sink = pa.BufferOutputStream()
    if index_file.extension == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, sink, row_group_size=8192, write_page_index=True, compression="zstd")
    else:
        with pa.ipc.new_file(sink, ENTRY_SCHEMA) as writer:
            writer.write_table(table, max_chunksize=max(1, table.num_rows))
    data = sink.getvalue().to_pybytes()
    storage.write_bytes(index_file.path, data)
    return len(data)


_OPENED: dict[tuple[str, int, int], pa.Table] = {}
_OPENED_MAX = 1024
_OPENED_LOCK = threading.Lock()


def read_entries(storage: Storage, index_file: IndexFile) -> pa.Table:
    """The entries of an index file (zero-copy memory map for local Arrow files).

    Index files never change once written (a retried task rewrites the same entries), so local
    memory maps are kept open per process, keyed by path, size and modification time.
    """
    from engine.storage.local import LocalStorage

    if isinstance(storage, LocalStorage) and index_file.extension == EXTENSION:
        path = storage.fs_path(index_file.path)
        st = os.stat(path)
        cache_key = (path, st.st_size, st.st_mtime_ns)
        table = _OPENED.get(cache_key)
        if table is None:
            table = _read_entries(storage, index_file)
            with _OPENED_LOCK:
                if len(_OPENED) >= _OPENED_MAX:
                    _OPENED.clear()
                _OPENED[cache_key] = table
        return table
    return _read_entries(storage, index_file)


def _read_entries(storage: Storage, index_file: IndexFile) -> pa.Table:
    from engine.storage.local import LocalStorage

    if index_file.extension == ".parquet":
        import pyarrow.parquet as pq

        with storage.open_input_file(index_file.path) as f:
            return pq.read_table(f)
    try:
        if isinstance(storage, LocalStorage):
            source = pa.memory_map(storage.fs_path(index_file.path))
        else:
            source = storage.open_input_file(index_file.path)
        return pa.ipc.open_file(source).read_all()
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorruptTableError(f"record index file {storage.uri(index_file.path)} cannot be read: {exc}") from exc


# ---- merging ----------------------------------------------------------------------------
def merge_entries(sources: Sequence[pa.Table], keep_tombstones: bool) -> pa.Table:
    """One entry per key from `sources` ordered newest first (ENTRY_SCHEMA each), sorted by
    (hash, key); without `keep_tombstones`, deleted keys are dropped (a compaction)."""
    ranked = []
    for rank, table in enumerate(sources):
        t = table.cast(ENTRY_SCHEMA)
        ranked.append(t.append_column("rank", pa.array(np.full(t.num_rows, rank, dtype=np.int32))))
    if not ranked:
        return ENTRY_SCHEMA.empty_table()
    unified = pa.concat_tables([t.unify_dictionaries() for t in ranked], promote_options="permissive")
    unified = unified.unify_dictionaries().combine_chunks()
    ordered = unified.sort_by([("key", "ascending"), ("rank", "ascending")])
    keys = ordered.column("key")
    n = ordered.num_rows
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    newest = ordered.filter(pa.array(first))
    if not keep_tombstones:
        newest = newest.filter(pc.invert(newest.column("deleted")))
    out = newest.drop_columns(["rank"]).sort_by([("hash", "ascending"), ("key", "ascending")])
    return out.cast(ENTRY_SCHEMA)


def plan_write_entries(
    keys: pa.Array, partitions: pa.Array, file_ids: pa.Array, ops: pa.Array, prev_file_ids: pa.Array | None,
    upsert: str = "U", delete: str = "D",
) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """(keys, partitions, file ids, deleted) of the entries a write produces from its located rows.

    An upsert row whose file id differs from the one tagging found (an insert: none found; a
    record moved to another partition; a key packed into an existing small file) gets an entry;
    an update in place gets none (its location did not change). A delete row gets a tombstone
    unless the same key also got an entry (moved: deleted in the old partition, inserted in the new).
    """
    is_upsert = pc.equal(ops, upsert)
    if prev_file_ids is None:
        changed = pa.array(np.ones(len(keys), dtype=bool))
    else:
        changed = pc.or_kleene(pc.is_null(prev_file_ids), pc.not_equal(prev_file_ids, file_ids))
        changed = pc.fill_null(changed, True)
    put = pc.and_(pc.and_(is_upsert, changed), pc.is_valid(file_ids))
    put_keys = pc.filter(keys, put)
    is_delete = pc.and_(pc.equal(ops, delete), pc.invert(pc.is_in(keys, value_set=put_keys)))
    d_keys = pc.unique(pc.filter(keys, is_delete))
    out_keys = pa.concat_arrays([put_keys.cast(pa.string()), d_keys.cast(pa.string())])
    nulls = pa.nulls(len(d_keys), pa.string())
    parts = pa.concat_arrays([pc.filter(partitions, put).cast(pa.string()), nulls])
    fids = pa.concat_arrays([pc.filter(file_ids, put).cast(pa.string()), nulls])
    deleted = pa.array(np.concatenate([np.zeros(len(put_keys), bool), np.ones(len(d_keys), bool)]))
    return out_keys, parts, fids, deleted


# ---- lookups ----------------------------------------------------------------------------
def _search_file(
    table: pa.Table, probe_h: np.ndarray, probe_keys: pa.Array, left: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `left`, row numbers) of the probes `left` (indices into `probe_h` /
    `probe_keys`) that `table` holds an entry for."""
    n = table.num_rows
    if n == 0 or len(left) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    column = table.column("hash")
    hashes = column.chunk(0).to_numpy() if column.num_chunks == 1 else column.to_numpy()
    keys = table.column("key")
    want = probe_h[left]
    pos = np.searchsorted(hashes, want, side="left")
    cand = np.flatnonzero(pos < n)
    cand = cand[hashes[pos[cand]] == want[cand]]
    if len(cand) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    rows = pos[cand]
    same = pc.equal(keys.take(rows), probe_keys.take(left[cand])).to_numpy(zero_copy_only=False)
    hit_probe, hit_row = [cand[same]], [rows[same]]
    # equal hashes, different keys: walk the run of that hash (rare)
    extra_p, extra_r = [], []
    for p, r in zip(cand[~same].tolist(), rows[~same].tolist(), strict=True):
        wanted, h = probe_keys[int(left[p])].as_py(), hashes[r]
        r += 1
        while r < n and hashes[r] == h:
            if keys[r].as_py() == wanted:
                extra_p.append(p)
                extra_r.append(r)
                break
            r += 1
    if extra_p:
        hit_probe.append(np.array(extra_p, np.int64))
        hit_row.append(np.array(extra_r, np.int64))
    return np.concatenate(hit_probe).astype(np.int64), np.concatenate(hit_row).astype(np.int64)


def search_bucket(
    storage: Storage, state: BucketState, probe_h: np.ndarray, probe_keys: pa.Array,
    opened: Callable[[IndexFile], pa.Table] | None = None,
) -> pa.Table:
    """FOUND_SCHEMA rows of the probe keys whose newest entry in the bucket is not a tombstone."""
    read = opened or (lambda f: read_entries(storage, f))
    left = np.arange(len(probe_h))
    parts: list[pa.Table] = []
    for source in state.sources:
        if len(left) == 0:
            break
        table = read(source)
        hits, rows = _search_file(table, probe_h, probe_keys, left)
        if len(hits) == 0:
            continue
        got = table.select(["partition", "file_id", "deleted"]).take(rows)
        found = pa.table(
            [
                probe_keys.take(left[hits]),
                got.column("partition").cast(pa.string()),
                got.column("file_id").cast(pa.string()),
            ],
            schema=FOUND_SCHEMA,
        )
        parts.append(found.filter(pc.invert(got.column("deleted"))))
        mask = np.ones(len(left), dtype=bool)
        mask[hits] = False
        left = left[mask]
    if not parts:
        return FOUND_SCHEMA.empty_table()
    return pa.concat_tables(parts).combine_chunks()


def lookup(
    storage: Storage,
    state: IndexState,
    keys: pa.Array,
    buckets: int,
    hasher: HashFunction = java_hash_array,
    threads: int = 1,
) -> pa.Table:
    """FOUND_SCHEMA rows (key, partition, file id) of the `keys` the index holds (distinct keys)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    if len(keys) == 0 or state.is_empty:
        return FOUND_SCHEMA.empty_table()
    h = np.asarray(hasher(keys), dtype=np.int64)
    b = (np.abs(h) % buckets).astype(np.int32)
    order = np.argsort(b, kind="stable")
    bounds = np.searchsorted(b[order], np.arange(buckets + 1), side="left")
    jobs = []
    for bucket in range(buckets):
        lo, hi = int(bounds[bucket]), int(bounds[bucket + 1])
        bstate = state.buckets.get(bucket)
        if hi > lo and bstate is not None and bstate.sources:
            idx = order[lo:hi]
            jobs.append((bstate, h[idx], keys.take(pa.array(idx))))
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            results = list(pool.map(lambda j: search_bucket(storage, *j), jobs))
    else:
        results = [search_bucket(storage, *j) for j in jobs]
    results = [r for r in results if r.num_rows]
    if not results:
        return FOUND_SCHEMA.empty_table()
    return pa.concat_tables(results).combine_chunks()
