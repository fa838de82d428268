"""The archived timeline: `.hoodie/archived/.commits_.archive.<N>_1-0-1` log files (Hudi 0.14, table v6).

Hudi's archiver (HoodieTimelineArchiver) appends instants it removes from the active timeline to
a Hudi log file (fileId `commits`, base instant "", extension `.archive`, write token `1-0-1`).
Each batch is one AVRO data block (HoodieAvroDataBlock, the codec in `engine.data.log_block`) of
HoodieArchivedMetaEntry records, with only the SCHEMA header set and an empty footer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from engine.data.log_block import (
    BlockType,
    HeaderKey,
    decode_avro_content,
    decode_log_blocks,
    encode_avro_content,
    encode_log_block,
)
from engine.errors import InvalidInputError
from engine.timeline.avro_models import commit_metadata_to_avro, parsed_schema, schema_json, validate_record
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action

ARCHIVED_ENTRY = "HoodieArchivedMetaEntry"
ARCHIVE_WRITE_TOKEN = "1-0-1"  # HoodieLogFile default (unknown) write token
_ARCHIVE_NAME_RE = re.compile(r"^\.commits_\.archive\.(\d+)_(.+)$")


def archive_file_name(version: int) -> str:
    """`.commits_.archive.<version>_1-0-1`, the name of archive log file number `version` (from 1)."""
    if version < 1:
        raise InvalidInputError(f"archive file versions start at 1, got {version}")
    return f".commits_.archive.{version}_{ARCHIVE_WRITE_TOKEN}"


def parse_archive_file_name(name: str) -> int | None:
    """The version of an archive log file name; None for any other name (e.g. the merge plan)."""
    match = _ARCHIVE_NAME_RE.match(name)
    return int(match.group(1)) if match else None


def archive_schema_header() -> str:
    """The SCHEMA header of archive blocks: HoodieArchivedMetaEntry's schema as compact JSON."""
    return json.dumps(schema_json(ARCHIVED_ENTRY), separators=(",", ":"))


def encode_archive_block(entries: list[dict[str, Any]]) -> bytes:
    """One AVRO data block of HoodieArchivedMetaEntry records, header {SCHEMA}, empty footer.

    Hudi's archiver (`writeToFile`) sets only the SCHEMA header key.
    """
    if not entries:
        raise InvalidInputError("an archive block needs at least one entry")
    for entry in entries:
        validate_record(ARCHIVED_ENTRY, entry)
    content = encode_avro_content(entries, parsed_schema(ARCHIVED_ENTRY))
    return encode_log_block(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: archive_schema_header()}, content)


def decode_archive_file(data: bytes) -> list[dict[str, Any]]:
    """All HoodieArchivedMetaEntry records of an archive log file, block by block, in order."""
    entries: list[dict[str, Any]] = []
    for block in decode_log_blocks(data):
        entries.extend(decode_avro_content(block, parsed_schema(ARCHIVED_ENTRY)))
    return entries


# Which HoodieArchivedMetaEntry field carries each completed action's metadata
# (MetadataConversionUtils.createMetaWrapper).
_METADATA_FIELD = {
    Action.COMMIT: "hoodieCommitMetadata",
    Action.DELTA_COMMIT: "hoodieCommitMetadata",
    Action.REPLACE_COMMIT: "hoodieReplaceCommitMetadata",
    Action.CLEAN: "hoodieCleanMetadata",
    Action.ROLLBACK: "hoodieRollbackMetadata",
    Action.SAVEPOINT: "hoodieSavePointMetadata",
}

_COMMIT_FIELDS = ("hoodieCommitMetadata", "hoodieReplaceCommitMetadata")


def archived_entry(
    instant_time: str,
    action: Action | str,
    state: str,
    metadata: CommitMetadata | Mapping[str, Any] | None,
    state_transition_time: str | None = None,
) -> dict[str, Any]:
    """A HoodieArchivedMetaEntry for a completed instant, as Hudi 0.14's archiver builds it.

    `metadata`: our CommitMetadata for commit/deltacommit/replacecommit; the Avro record (HoodieCleanMetadata,
    HoodieRollbackMetadata, HoodieSavepointMetadata) for clean/rollback/savepoint; None for an
    instant whose completed file is empty (`createMetaWrapperForEmptyInstant`). `actionState` is
    the state name ("COMPLETED"); `version` stays null because Hudi builds the entry with the Avro
    no-arg constructor. `stateTransitionTime` is the instant's completion time when known.

    Restore instants are refused: Hudi 0.14 never archives them (the archiver selects only
    clean/rollback and completed write instants, and createMetaWrapper has no restore case, it
    throws UnsupportedOperationException); they stay on the active timeline.
    """
    act = Action(action)
    if act not in _METADATA_FIELD:
        raise InvalidInputError(f"Hudi 0.14 does not archive {act.value} instants")
    entry: dict[str, Any] = {f["name"]: None for f in schema_json(ARCHIVED_ENTRY)["fields"]}
    entry |= {
        "commitTime": instant_time,
        "actionType": act.value,
        "actionState": state.upper(),
        "version": None,
        "stateTransitionTime": state_transition_time,
    }
    field_name = _METADATA_FIELD[act]
    if metadata is not None:
        if isinstance(metadata, CommitMetadata):
            if field_name not in _COMMIT_FIELDS:
                raise InvalidInputError(f"{act.value} metadata must be an Avro record, not CommitMetadata")
            entry[field_name] = commit_metadata_to_avro(metadata)
            if act is Action.REPLACE_COMMIT:  # ReplaceArchivalHelper.convertReplaceCommitMetadata
                entry[field_name]["partitionToReplaceFileIds"] = metadata.partition_to_replace_file_ids or {}
        else:
            if field_name in _COMMIT_FIELDS:
                raise InvalidInputError(f"{act.value} metadata must be a CommitMetadata")
            entry[field_name] = dict(metadata)
    validate_record(ARCHIVED_ENTRY, entry)
    return entry
