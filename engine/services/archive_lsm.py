"""The LSM history of timeline layout 2 on storage: append an archival batch, read it back,
compact layer files (the format and the pure choices are `engine.timeline.lsm`).

Order of an append (crash safety, as Apache Hudi 1.x's `LSMTimelineWriter.write`):
1. the layer-0 data file `<min>_<max>_0.parquet` (a file of that name the latest manifest does
   not list is a torn earlier attempt: deleted first; one it lists means the batch is in);
2. `manifest_<N+1>` (a leftover of that name, from an attempt killed before step 3, is replaced);
3. `_version_` = N+1: from here on readers see the batch.
Instants the history already holds are never written twice: the caller skips them
(`held_times`), so an archival killed after step 3 only has to remove the active files.

Compaction (after the active files are removed, as Java does): while a layer holds
`hoodie.timeline.compaction.batch.size` files, its oldest run is merged into one file of the next
layer and a new manifest lists it instead of them; then snapshot versions beyond the newest
3 (+1 per compacted layer) are cleaned: their manifests first, then the data files no kept
manifest lists. A crash anywhere leaves the latest `_version_` valid: leftovers are unlisted.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from engine import failpoints
from engine.table.lsm_history import (  # noqa: F401  (the reading side, re-exported)
    all_versions,
    archived_entries,
    archived_instants,
    completion_times,
    held_times,
    history_folder,
    latest_version,
    read_file,
    read_manifest,
    read_rows,
)
from engine.table.meta_client import MetaClient
from engine.timeline import lsm
from engine.timeline.instant import Action, Instant, State

_log = logging.getLogger(__name__)
COMPRESSION = "gzip"  # Apache Hudi's default hoodie.parquet.compression.codec
ARROW_SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),  # Avro "int" (no union): parquet-avro's required int32
])
# what parquet-avro's AvroWriteSupport puts in the footer (Apache Hudi reads the Avro schema there)
FOOTER = {"parquet.avro.schema": lsm.instant_schema_text(), "writer.model.name": "avro"}


# ---- writing -----------------------------------------------------------------------------------
def _optional(meta: MetaClient, instant: Instant) -> bytes | None:
    try:
        return meta.storage.read_bytes(meta.instant_path(instant)) or None
    except FileNotFoundError:
        return None


def _plan(meta: MetaClient, inst: Instant) -> bytes | None:
    """The plan Java stores with an archived instant (by its pending action): the clean plan,
    the compaction plan of a compaction (completed as a commit), the requested replace metadata
    of a clustering or replacecommit (the inflight metadata instead when it has any)."""
    t = inst.time
    if inst.action is Action.CLEAN:
        return _optional(meta, Instant(t, Action.CLEAN, State.REQUESTED))
    if inst.action is Action.COMMIT:
        return _optional(meta, Instant(t, Action.COMPACTION, State.REQUESTED))
    if inst.action is Action.DELTA_COMMIT:
        return _optional(meta, Instant(t, Action.LOG_COMPACTION, State.REQUESTED))
    if inst.action is Action.REPLACE_COMMIT:
        plan = None
        for action in (Action.CLUSTERING, Action.REPLACE_COMMIT):
            plan = plan or _optional(meta, Instant(t, action, State.REQUESTED))
        for action in (Action.CLUSTERING, Action.REPLACE_COMMIT):
            plan = _optional(meta, Instant(t, action, State.INFLIGHT)) or plan
        return plan
    return None


def instant_rows(meta: MetaClient, instants: Sequence[Instant]) -> list[dict]:
    return [
        lsm.instant_row(i.time, i.completion_time, i.action.value, meta.read_instant(i) or None, _plan(meta, i))
        for i in instants
    ]


def encode_parquet(rows: list[dict]) -> bytes:
    """Rows as a Parquet file laid out as parquet-avro writes `HoodieLSMTimelineInstant`."""
    table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, ARROW_SCHEMA, compression=COMPRESSION, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(FOOTER)
    return buf.getvalue()


def _put_data_file(meta: MetaClient, name: str, data: bytes) -> None:
    path = f"{history_folder(meta)}/{name}"
    meta.storage.delete(path)  # not listed by the latest manifest: a torn attempt (Java deletes it too)
    meta.storage.create_exclusive(path, data)


def _commit_manifest(meta: MetaClient, manifest: lsm.Manifest, current: int) -> int:
    """Write `manifest_<current+1>` then `_version_`; returns the new version."""
    folder = history_folder(meta)
    version = current + 1
    path = f"{folder}/{lsm.manifest_name(version)}"
    meta.storage.delete(path)  # left by an attempt killed before it wrote `_version_`
    meta.storage.create_exclusive(path, manifest.to_json())
    failpoints.hit("archive.after_manifest")
    meta.storage.write_bytes(f"{folder}/{lsm.VERSION_FILE}", lsm.encode_version_file(version))
    return version


def settle(meta: MetaClient) -> int:
    """Point `_version_` at the newest manifest when an attempt died between writing that
    manifest and `_version_` (or `_version_` is unreadable): the manifest was created whole,
    after its data file, so it is a valid snapshot. Returns the latest version (0: none)."""
    folder = history_folder(meta)
    try:
        named = lsm.parse_version_file(meta.storage.read_bytes(f"{folder}/{lsm.VERSION_FILE}"))
    except FileNotFoundError:
        named = None
    newest = max(all_versions(meta), default=0)
    if newest > (named or 0):
        meta.storage.write_bytes(f"{folder}/{lsm.VERSION_FILE}", lsm.encode_version_file(newest))
        return newest
    return named or 0


def append(meta: MetaClient, instants: Sequence[Instant]) -> str | None:
    """Write one archival batch (instants in time order, none already held) as a layer-0 file
    and a new snapshot version; returns the file name (None for an empty batch)."""
    if not instants:
        return None
    folder = history_folder(meta)
    meta.storage.makedirs(folder)
    current = latest_version(meta)
    manifest = read_manifest(meta, current)
    name = lsm.batch_file_name([i.time for i in instants])
    if name in manifest.file_names:
        return name  # the batch is in (Java: "Skip archiving for the redundant file")
    _put_data_file(meta, name, encode_parquet(instant_rows(meta, instants)))
    failpoints.hit("archive.after_data_file")
    entry = lsm.ManifestEntry(name, meta.storage.size(f"{folder}/{name}"))
    _commit_manifest(meta, manifest.with_file(entry), current)
    return name


def compact(meta: MetaClient, batch_size: int = lsm.DEFAULT_COMPACTION_BATCH,
            max_bytes: int = lsm.DEFAULT_COMPACTION_MAX_BYTES) -> list[str]:
    """Merge full layers into the next (`LSMTimelineWriter.compactAndClean`), then clean old
    snapshot versions; returns the names of the files written."""
    written: list[str] = []
    layer = 0
    while True:
        current = latest_version(meta)
        manifest = read_manifest(meta, current)
        sources = lsm.compaction_candidates(manifest, layer, batch_size, max_bytes)
        if not sources:
            break
        target = lsm.compacted_file_name(sources)
        tables = [read_file(meta, s) for s in sources]
        merged = pa.concat_tables([t.select(list(lsm.COLUMNS)).cast(ARROW_SCHEMA) for t in tables])
        _put_data_file(meta, target, encode_parquet(merged.to_pylist()))
        entry = lsm.ManifestEntry(target, meta.storage.size(f"{history_folder(meta)}/{target}"))
        _commit_manifest(meta, manifest.with_file(entry, removing=sources), current)
        written.append(target)
        layer += 1
    if written:
        clean(meta, layer)
    return written


def clean(meta: MetaClient, compacted_layers: int) -> list[str]:
    """Delete snapshot versions beyond the kept ones: manifests first, then unlisted data files."""
    folder = history_folder(meta)
    kept, dropped = lsm.versions_to_clean(all_versions(meta), compacted_layers)
    if not dropped:
        return []
    keep_files = {n for v in kept for n in read_manifest(meta, v).file_names}
    removed = []
    for v in dropped:
        meta.storage.delete(f"{folder}/{lsm.manifest_name(v)}")
        removed.append(lsm.manifest_name(v))
    for f in meta.storage.list_dir(folder):
        if not f.is_dir and lsm.parse_data_file_name(f.name) is not None and f.name not in keep_files:
            meta.storage.delete(f.path)
            removed.append(f.name)
    _log.info("LSM timeline of %s: cleaned %s", meta.storage.base_uri, removed)
    return removed
