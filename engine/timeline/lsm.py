"""The LSM archived timeline of timeline layout 2 (table versions 8, 9; Apache Hudi 1.x) — pure.

Apache Hudi 1.x (`LSMTimeline`, `LSMTimelineWriter`, `HoodieLSMTimelineManifest`) keeps the
archived instants under `.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>`
(default `.hoodie/timeline/history/`):

- data files `<minInstant>_<maxInstant>_<layer>.parquet`: Parquet (written by parquet-avro) of
  `HoodieLSMTimelineInstant` rows, one per archived instant in instant order. An archival batch
  adds one layer-0 file; once a layer holds `hoodie.timeline.compaction.batch.size` files
  (default 10) the oldest of them (consecutive, at most that many, under a size cap) are merged
  into one file of the next layer. Ranges of files may overlap;
- `manifest_<N>`: the files of snapshot version N, Jackson's pretty-printed JSON
  `{"files" : [ {"fileName" : ..., "fileLen" : ...}, ... ]}`; versions start at 1 and each flush
  or compaction adds one;
- `_version_`: the latest N as decimal text (a reader that cannot read it takes the largest N
  among the manifests). Readers read only the files the latest manifest lists.

This module names and parses those files, encodes and decodes manifests, builds the rows and
chooses files to compact. The storage side is `engine.services.archive_lsm`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import CorruptTableError, InvalidInputError

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
TEMP_SUFFIX = ".tmp"
INSTANT_VERSION = 1  # LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
DEFAULT_COMPACTION_BATCH = 10  # hoodie.timeline.compaction.batch.size
DEFAULT_COMPACTION_MAX_BYTES = 1024 * 1024 * 1024  # hoodie.timeline.compaction.target.file.max.bytes
KEEP_VERSIONS = 3  # LSMTimelineWriter.clean keeps 3 snapshot versions (+1 per compacted layer)

_DATA_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")

# hudi-common/src/main/avro/HoodieLSMTimelineInstant.avsc, field order and defaults as there
INSTANT_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantTime", "type": ["null", "string"], "default": None},
        {"name": "completionTime", "type": ["null", "string"], "default": None},
        {"name": "action", "type": ["null", "string"], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": 1},
    ],
}
COLUMNS = tuple(f["name"] for f in INSTANT_SCHEMA["fields"])


def instant_schema_text() -> str:
    """The Avro schema as Java's `Schema.toString()` renders it (compact JSON, field order kept):
    the value parquet-avro stores under `parquet.avro.schema`."""
    return json.dumps(INSTANT_SCHEMA, separators=(",", ":"))


@dataclass(frozen=True, order=True)
class DataFileName:
    """`<min>_<max>_<layer>.parquet`: the instant range a history data file holds and its layer."""

    min_instant: str
    max_instant: str
    layer: int

    @property
    def name(self) -> str:
        return data_file_name(self.min_instant, self.max_instant, self.layer)


def data_file_name(min_instant: str, max_instant: str, layer: int) -> str:
    """The name of a history data file (`LSMTimelineWriter.newFileName`)."""
    if not (0 <= layer <= 9):  # the reader's pattern has one digit for the layer
        raise InvalidInputError(f"LSM layers are 0..9, got {layer}")
    if min_instant > max_instant:
        raise InvalidInputError(f"instant range {min_instant}..{max_instant} is reversed")
    return f"{min_instant}_{max_instant}_{layer}.parquet"


def parse_data_file_name(name: str) -> DataFileName | None:
    """The range and layer of a history data file name; None for any other name."""
    m = _DATA_FILE_RE.match(name)
    return DataFileName(m.group(1), m.group(2), int(m.group(3))) if m else None


def manifest_name(version: int) -> str:
    if version < 1:
        raise InvalidInputError(f"manifest versions start at 1, got {version}")
    return f"{MANIFEST_PREFIX}{version}"


def parse_manifest_name(name: str) -> int | None:
    """The snapshot version of `manifest_<N>`; None for other names (and `.tmp` leftovers)."""
    m = _MANIFEST_RE.match(name)
    return int(m.group(1)) if m else None


def parse_version_file(data: bytes) -> int | None:
    """The version `_version_` names; None when it is unreadable (then the largest manifest counts)."""
    try:
        return int(data.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError):
        return None


def encode_version_file(version: int) -> bytes:
    return str(version).encode("utf-8")


@dataclass(frozen=True)
class ManifestEntry:
    file_name: str
    file_len: int


@dataclass(frozen=True)
class Manifest:
    """The data files of one snapshot version, in the order they were added."""

    files: tuple[ManifestEntry, ...] = ()

    @property
    def file_names(self) -> list[str]:
        return [f.file_name for f in self.files]

    def with_file(self, entry: ManifestEntry, removing: Iterable[str] = ()) -> Manifest:
        """This manifest without `removing`, plus `entry` last (`HoodieLSMTimelineManifest.copy` + `addFile`)."""
        gone = set(removing)
        kept = tuple(f for f in self.files if f.file_name not in gone and f.file_name != entry.file_name)
        return Manifest((*kept, entry))

    def to_json(self) -> bytes:
        """Jackson's default pretty printer output, as `HoodieLSMTimelineManifest.toJsonString` writes it."""
        if not self.files:
            return b'{\n  "files" : [ ]\n}'
        entries = ", ".join(
            "{\n"
            f'    "fileName" : {json.dumps(f.file_name)},\n'
            f'    "fileLen" : {int(f.file_len)}\n'
            "  }"
            for f in self.files
        )
        return ('{\n  "files" : [ ' + entries + " ]\n}").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """Parse a manifest (unknown fields ignored, as Java's `@JsonIgnoreProperties`); an empty
        file is an empty manifest (`fromJsonString`)."""
        if not data.strip():
            return cls()
        try:
            doc = json.loads(data.decode("utf-8"))
            files = doc.get("files") or []
            return cls(tuple(ManifestEntry(str(f["fileName"]), int(f.get("fileLen") or 0)) for f in files))
        except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptTableError(f"not an LSM timeline manifest: {exc}") from exc


def instant_row(
    instant_time: str, completion_time: str | None, action: str, metadata: bytes | None, plan: bytes | None
) -> dict[str, Any]:
    """One `HoodieLSMTimelineInstant` row (`MetadataConversionUtils.createLSMTimelineInstant`):
    `metadata` holds the completed instant file's bytes as they are (an empty file: null),
    `plan` the requested plan of clean, compaction and replacecommit/clustering instants."""
    return {
        "instantTime": instant_time,
        "completionTime": completion_time,
        "action": action,
        "metadata": metadata or None,
        "plan": plan or None,
        "version": INSTANT_VERSION,
    }


def batch_file_name(instant_times: Sequence[str]) -> str:
    """The layer-0 file of one archival batch: named by its first and last instant (the batch
    is in instant order, as Java's `write` names it from the first and last action)."""
    if not instant_times:
        raise InvalidInputError("an archival batch needs at least one instant")
    return data_file_name(instant_times[0], instant_times[-1], 0)


def compaction_candidates(
    manifest: Manifest, layer: int, batch_size: int = DEFAULT_COMPACTION_BATCH,
    max_bytes: int = DEFAULT_COMPACTION_MAX_BYTES,
) -> list[str]:
    """The files of `layer` to merge into one file of `layer + 1`, oldest first; [] for none.

    As `LSMTimelineWriter.doCompact` / `getCandidateFiles`: nothing until the layer holds
    `batch_size` files; then, in name order (min instant first), the first run of at least 2 and
    at most `batch_size` files whose total size stays under `max_bytes` (a file that alone passes
    the cap restarts the run)."""
    if batch_size < 2:
        raise InvalidInputError(f"hoodie.timeline.compaction.batch.size must be at least 2, got {batch_size}")
    files = sorted(
        (f for f in manifest.files if (p := parse_data_file_name(f.file_name)) is not None and p.layer == layer),
        key=lambda f: f.file_name,
    )
    if len(files) < batch_size:
        return []
    chosen: list[str] = []
    total = 0
    for f in files:
        total += f.file_len
        chosen.append(f.file_name)
        if len(chosen) >= batch_size:
            break
        if total > max_bytes:
            if len(chosen) < 2:
                chosen, total = [], 0
            else:
                break
    return chosen if len(chosen) >= 2 else []


def compacted_file_name(files: Sequence[str]) -> str:
    """The next layer's file for `files` of one layer: their overall instant range."""
    parsed = [parse_data_file_name(f) for f in files]
    if not parsed or any(p is None for p in parsed):
        raise InvalidInputError(f"not LSM data files: {list(files)}")
    ok = [p for p in parsed if p is not None]
    return data_file_name(min(p.min_instant for p in ok), max(p.max_instant for p in ok), ok[0].layer + 1)


def versions_to_clean(versions: Iterable[int], compacted_layers: int) -> tuple[list[int], list[int]]:
    """(kept, dropped) snapshot versions after a compaction: the newest `3 + compacted_layers`
    stay (`LSMTimelineWriter.clean`), the rest go; nothing goes while there are not more."""
    ordered = sorted(set(versions), reverse=True)
    keep = KEEP_VERSIONS + compacted_layers
    if len(ordered) <= keep:
        return ordered, []
    return ordered[:keep], ordered[keep:]
