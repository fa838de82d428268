"""Reading the LSM history of timeline layout 2 (versions 8 and 9): the latest snapshot version,
its manifest, the archived instants and their completion times (the format is
`engine.timeline.lsm`; appending and compacting it is `engine.services.archive_lsm`). The file-system
view reads completion times here to slice log files older than the active timeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import CorruptTableError
from engine.timeline import lsm
from engine.timeline.instant import Action, Instant, State

if TYPE_CHECKING:  # the meta client reads archived completion times through this module
    from engine.table.meta_client import MetaClient


def history_folder(meta: MetaClient) -> str:
    return meta.layout.history


# ---- reading -----------------------------------------------------------------------------------
def latest_version(meta: MetaClient) -> int:
    """The latest snapshot version: `_version_`, else the largest `manifest_<N>`; 0 for none."""
    folder = history_folder(meta)
    try:
        version = lsm.parse_version_file(meta.storage.read_bytes(f"{folder}/{lsm.VERSION_FILE}"))
    except FileNotFoundError:
        version = None
    if version is not None:
        return version
    return max(all_versions(meta), default=0)


def all_versions(meta: MetaClient) -> list[int]:
    found = (lsm.parse_manifest_name(f.name) for f in meta.storage.list_dir(history_folder(meta)) if not f.is_dir)
    return sorted(v for v in found if v is not None)


def read_manifest(meta: MetaClient, version: int | None = None) -> lsm.Manifest:
    """The manifest of `version` (default: the latest); empty when there is none."""
    version = latest_version(meta) if version is None else version
    if version < 1:
        return lsm.Manifest()
    path = f"{history_folder(meta)}/{lsm.manifest_name(version)}"
    try:
        return lsm.Manifest.from_json(meta.storage.read_bytes(path))
    except FileNotFoundError as exc:
        raise CorruptTableError(f"{meta.storage.uri(path)}: the LSM timeline's version names a missing manifest") from exc
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.storage.uri(path)}: {exc}") from exc


def read_file(meta: MetaClient, name: str, columns: Sequence[str] | None = None) -> pa.Table:
    path = f"{history_folder(meta)}/{name}"
    try:
        with meta.storage.open_input_file(path) as f:
            return pq.read_table(f, columns=list(columns) if columns else None)
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise CorruptTableError(f"{meta.storage.uri(path)}: listed in the LSM manifest but missing") from exc
        raise CorruptTableError(f"{meta.storage.uri(path)}: not a readable LSM timeline file: {exc}") from exc


def read_rows(meta: MetaClient, columns: Sequence[str] | None = None) -> list[dict]:
    """Every archived instant's row (`HoodieLSMTimelineInstant` as a dict) of the latest snapshot,
    in instant order (files may overlap after an interrupted compaction: one row per instant)."""
    rows: dict[tuple[str, str], dict] = {}
    for name in read_manifest(meta).file_names:
        for row in read_file(meta, name, columns).to_pylist():
            rows[(row.get("instantTime") or "", row.get("action") or "")] = row
    return [rows[k] for k in sorted(rows)]


def held_times(meta: MetaClient) -> set[str]:
    """The instant times the history holds."""
    return {r["instantTime"] for r in read_rows(meta, ["instantTime", "action"]) if r.get("instantTime")}


def completion_times(meta: MetaClient) -> dict[str, str]:
    """instant time -> completion time of every archived instant (older than the active timeline)."""
    rows = read_rows(meta, ["instantTime", "completionTime", "action"])
    return {r["instantTime"]: r["completionTime"] for r in rows if r.get("instantTime") and r.get("completionTime")}


def archived_instants(meta: MetaClient) -> list[Instant]:
    """The archived instants, completed, with their completion times, oldest first."""
    out = []
    for r in read_rows(meta, ["instantTime", "completionTime", "action"]):
        try:
            out.append(Instant(r["instantTime"], Action(r["action"]), State.COMPLETED, r.get("completionTime")))
        except (ValueError, TypeError):
            continue  # an action this engine does not know: not listed
    return sorted(out)


def archived_entries(meta: MetaClient) -> list[dict]:
    """The archived instants in the shape of the version 6 archive's entries (`commitTime`,
    `actionType`, `actionState`, `stateTransitionTime` = completion time), for the listings."""
    return [
        {"commitTime": i.time, "actionType": i.action.value, "actionState": "COMPLETED",
         "stateTransitionTime": i.completion_time}
        for i in archived_instants(meta)
    ]
