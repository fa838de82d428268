"""Hudi tables made by hand, without Spark: parquet base files (pyarrow) plus commit files.

For the console's tests and benchmark, where only files and metadata are needed. Every commit
writes its base files (with the five `_hoodie_*` meta columns), then `T.commit.requested`,
`T.inflight` and the completed `T.commit` with write stats and the schema, as the engine does.

    commits = [{"paris": ["new", "new"], "berlin": ["new"]},          # 3 new file groups
               {"paris": ["update:0"]}]                               # a new slice of paris's 1st group
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

from engine.constants import METAFOLDER
from engine.data.file_names import base_file_name, new_file_id
from engine.schema.avro import arrow_to_avro, avro_to_json
from engine.storage import storage_for
from engine.table.create import new_table_config
from engine.table.meta_client import MetaClient
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State, format_instant_time

DATA_SCHEMA = pa.schema([("trip_id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]


@dataclass
class Handmade:
    path: str
    meta: MetaClient
    instants: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)  # partition -> file ids, creation order
    keys: dict[str, list[str]] = field(default_factory=dict)  # file id -> its record keys


def create(path: str, name: str = "trips", index: str = "BLOOM") -> Handmade:
    config = new_table_config(name=name, record_key="trip_id", partition_fields="city", precombine_field="ts",
                              index=index)
    return Handmade(path, MetaClient.create(storage_for(path), config))


def _parquet(rows: list[dict]) -> bytes:
    table = pa.Table.from_pylist(rows, schema=pa.schema([pa.field(m, pa.string()) for m in META] + list(DATA_SCHEMA)))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def add_commit(
    t: Handmade,
    spec: dict[str, Sequence[str]],
    rows_per_file: int = 3,
    at: datetime | None = None,
    payload_bytes: int | None = None,
) -> str:
    """One completed commit; `spec` maps partition -> ["new" | "update:<n>", ...] (n: the n-th
    group of that partition). `payload_bytes`: write that many filler bytes instead of parquet
    (listing-only benchmarks). Returns the instant time."""
    last = t.instants[-1] if t.instants else None
    moment = at or datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=len(t.instants))
    time = format_instant_time(moment)
    if last is not None and time <= last:
        raise ValueError("instants must increase")
    storage = t.meta.storage
    stats: dict[str, list[WriteStat]] = {}
    for partition, files in spec.items():
        if not storage.exists(f"{partition}/.hoodie_partition_metadata"):
            t.meta.ensure_partition_metadata(partition, time)
        for k, what in enumerate(files):
            if what == "new":
                fid, prev = new_file_id(), "null"
                keys = [f"{partition}-{len(t.keys)}-{i}" for i in range(rows_per_file)]
                t.groups.setdefault(partition, []).append(fid)
                t.keys[fid] = keys
                inserts, updates = len(keys), 0
            else:
                fid = t.groups[partition][int(what.split(":")[1])]
                prev = next(i for i in reversed(t.instants) if i in _instants_of(t, fid))
                keys = t.keys[fid]
                inserts, updates = 0, len(keys)
            name = base_file_name(fid, f"{k}-0-{k}", time)
            rel = f"{partition}/{name}"
            rows = [{"_hoodie_commit_time": time, "_hoodie_commit_seqno": f"{time}_0_{i}", "_hoodie_record_key": key,
                     "_hoodie_partition_path": partition, "_hoodie_file_name": name, "trip_id": key, "city": partition,
                     "ts": i, "fare": 10.0 + i} for i, key in enumerate(keys)]
            body = _parquet(rows) if payload_bytes is None else b"\0" * payload_bytes
            storage.write_bytes(rel, body)
            _FILES.setdefault(t.path, {}).setdefault(fid, []).append(time)
            stats.setdefault(partition, []).append(WriteStat(
                fileId=fid, path=rel, partitionPath=partition, prevCommit=prev, numWrites=len(keys),
                numInserts=inserts, numUpdateWrites=updates, totalWriteBytes=len(body), fileSizeInBytes=len(body)))
    schema = avro_to_json(arrow_to_avro(DATA_SCHEMA, t.meta.config.name))
    cm = CommitMetadata(stats, "UPSERT", {"schema": schema})
    requested = Instant(time, Action.COMMIT, State.REQUESTED)
    storage.create_exclusive(f"{METAFOLDER}/{requested.file_name}", b"")
    storage.create_exclusive(f"{METAFOLDER}/{requested.with_state(State.INFLIGHT).file_name}", b"")
    storage.create_exclusive(f"{METAFOLDER}/{requested.with_state(State.COMPLETED).file_name}", cm.to_bytes())
    t.instants.append(time)
    return time


_FILES: dict[str, dict[str, list[str]]] = {}


def _instants_of(t: Handmade, fid: str) -> list[str]:
    return _FILES.get(t.path, {}).get(fid, [])


def add_pending(t: Handmade, at: datetime, state: State = State.INFLIGHT) -> str:
    """A commit left requested or inflight (a writer that died), no files."""
    time = format_instant_time(at)
    requested = Instant(time, Action.COMMIT, State.REQUESTED)
    t.meta.storage.create_exclusive(f"{METAFOLDER}/{requested.file_name}", b"")
    if state is State.INFLIGHT:
        t.meta.storage.create_exclusive(f"{METAFOLDER}/{requested.with_state(State.INFLIGHT).file_name}",
                                        CommitMetadata().to_bytes())
    t.instants.append(time)
    return time


def file_count(path: str) -> int:
    return sum(len(files) for _d, _s, files in os.walk(path))


def add_failed_write(t: Handmade, at: datetime, partition: str, known: bool = True) -> str:
    """A straggler's base file of a write that aborted at `at` (no timeline files), in a new file
    group of `partition`; `known`: the write recorded itself in `.hoodie/.failed_writes/` (as the
    engine's abort does), else the file's instant is one this table never knew. Returns its path."""
    from engine.table import failed_writes

    time = format_instant_time(at)
    fid = new_file_id()
    name = base_file_name(fid, "0-0-0", time)
    rel = f"{partition}/{name}"
    rows = [{"_hoodie_commit_time": time, "_hoodie_commit_seqno": f"{time}_0_0", "_hoodie_record_key": f"debris-{fid}",
             "_hoodie_partition_path": partition, "_hoodie_file_name": name, "trip_id": f"debris-{fid}",
             "city": partition, "ts": 0, "fare": 1.0}]
    t.meta.storage.write_bytes(rel, _parquet(rows))
    if known:
        failed_writes.record(t.meta.storage, time, "commit", [(partition, fid)])
    return rel
