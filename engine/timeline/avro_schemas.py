"""Apache Hudi's Avro schemas for timeline metadata (namespace `org.apache.hudi.avro.model`), as of 0.14.

Written here as Python dicts from the `.avsc` files under `hudi-common/src/main/avro/` (field
names, order, types, defaults and namespaces as Hudi declares them; `doc` strings left out).
Hudi stores each plan / metadata file with its writer schema embedded, and each archived-log
block with the writer schema in its header, so a Java reader resolves our records against its
own schema by field name: what must match is every record's full name and every field Hudi
declares without a default.

`SCHEMAS` maps a short record name to its definition; references to other records are by short
name. `self_contained(name)` inlines every referenced record at its first use, the form
`Schema.toString()` produces in Java and the one written into files.
"""

from __future__ import annotations

import copy
from typing import Any

NAMESPACE = "org.apache.hudi.avro.model"

Schema = dict[str, Any]


def _field(name: str, type_: Any, **default: Any) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": type_}
    if "default" in default:
        field["default"] = default["default"]
    return field


def _nullable(name: str, type_: Any) -> dict[str, Any]:
    """`["null", T]` with default null, Hudi's usual optional field."""
    return _field(name, ["null", type_], default=None)


def _version() -> dict[str, Any]:
    return _field("version", ["int", "null"], default=1)


def _array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _map(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


def _record(name: str, fields: list[dict[str, Any]]) -> Schema:
    return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}


_STRINGS = _array("string")

SCHEMAS: dict[str, Schema] = {}


def _define(schema: Schema) -> None:
    SCHEMAS[schema["name"]] = schema


# --- instants --------------------------------------------------------------------------------
_define(_record("HoodieInstantInfo", [_field("commitTime", "string"), _field("action", "string")]))
_define(_record("HoodieActionInstant", [
    _field("timestamp", "string"), _field("action", "string"), _field("state", "string"),
]))

# --- rollback --------------------------------------------------------------------------------
_define(_record("HoodieRollbackRequest", [
    _field("partitionPath", "string"),
    _nullable("fileId", "string"),
    _nullable("latestBaseInstant", "string"),
    _field("filesToBeDeleted", {"type": "array", "default": [], "items": "string"}, default=[]),
    _nullable("logBlocksToBeDeleted", _map("long")),
]))
_define(_record("HoodieRollbackPlan", [
    _nullable("instantToRollback", "HoodieInstantInfo"),
    _nullable("RollbackRequests", _array("HoodieRollbackRequest")),
    _version(),
]))
_define(_record("HoodieRollbackPartitionMetadata", [
    _field("partitionPath", "string"),
    _field("successDeleteFiles", _STRINGS),
    _field("failedDeleteFiles", _STRINGS),
    _nullable("rollbackLogFiles", _map("long")),
]))
_define(_record("HoodieRollbackMetadata", [
    _field("startRollbackTime", "string"),
    _field("timeTakenInMillis", "long"),
    _field("totalFilesDeleted", "int"),
    _field("commitsRollback", _STRINGS),
    _field("partitionMetadata", _map("HoodieRollbackPartitionMetadata")),
    _version(),
    _field("instantsRollback", {"type": "array", "default": [], "items": "HoodieInstantInfo"}, default=[]),
]))

# --- restore ---------------------------------------------------------------------------------
_define(_record("HoodieRestorePlan", [
    _field("instantsToRollback", {"type": "array", "default": None, "items": "HoodieInstantInfo"}, default=[]),
    _version(),
]))
_define(_record("HoodieRestoreMetadata", [
    _field("startRestoreTime", "string"),
    _field("timeTakenInMillis", "long"),
    _field("instantsToRollback", _STRINGS),
    _field("hoodieRestoreMetadata", _map({
        "type": "array", "default": None, "items": ["null", "HoodieRollbackMetadata"],
        "name": "hoodieRollbackMetadata",
    })),
    _version(),
    _field("restoreInstantInfo", {"type": "array", "default": None, "items": "HoodieInstantInfo"}, default=[]),
]))

# --- clean -----------------------------------------------------------------------------------
_define(_record("HoodieCleanFileInfo", [
    _nullable("filePath", "string"),
    _nullable("isBootstrapBaseFile", "boolean"),
]))
_define(_record("HoodieCleanerPlan", [
    _nullable("earliestInstantToRetain", "HoodieActionInstant"),
    _field("lastCompletedCommitTimestamp", "string", default=""),
    _field("policy", "string"),
    # deprecated since plan version 2 (replaced by filePathsToBeDeletedPerPartition)
    _nullable("filesToBeDeletedPerPartition", _map(_STRINGS)),
    _version(),
    _nullable("filePathsToBeDeletedPerPartition", _map(_array("HoodieCleanFileInfo"))),
    _nullable("partitionsToBeDeleted", _STRINGS),
]))
_define(_record("HoodieCleanPartitionMetadata", [
    _field("partitionPath", "string"),
    _field("policy", "string"),
    _field("deletePathPatterns", _STRINGS),
    _field("successDeleteFiles", _STRINGS),
    _field("failedDeleteFiles", _STRINGS),
    _nullable("isPartitionDeleted", "boolean"),
]))
_define(_record("HoodieCleanMetadata", [
    _field("startCleanTime", "string"),
    _field("timeTakenInMillis", "long"),
    _field("totalFilesDeleted", "int"),
    _field("earliestCommitToRetain", "string"),
    _field("lastCompletedCommitTimestamp", "string", default=""),
    _field("partitionMetadata", _map("HoodieCleanPartitionMetadata")),
    _version(),
    _nullable("bootstrapPartitionMetadata", {
        "type": "map", "values": "HoodieCleanPartitionMetadata", "default": None,
    }),
]))

# --- savepoint -------------------------------------------------------------------------------
_define(_record("HoodieSavepointPartitionMetadata", [
    _field("partitionPath", "string"),
    _field("savepointDataFile", _STRINGS),
]))
_define(_record("HoodieSavepointMetadata", [
    _field("savepointedBy", "string"),
    _field("savepointedAt", "long"),
    _field("comments", "string"),
    _field("partitionMetadata", _map("HoodieSavepointPartitionMetadata")),
    _version(),
]))

# --- commit ----------------------------------------------------------------------------------
_WRITE_STAT_LONGS_1 = ["numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors"]
_WRITE_STAT_LONGS_2 = ["totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted", "numInserts",
                       "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes"]
_define(_record("HoodieWriteStat", [
    _nullable("fileId", "string"),
    _nullable("path", "string"),
    _nullable("prevCommit", "string"),
    *[_nullable(n, "long") for n in _WRITE_STAT_LONGS_1],
    _nullable("partitionPath", "string"),
    *[_nullable(n, "long") for n in _WRITE_STAT_LONGS_2],
    _nullable("logVersion", "int"),
    _nullable("logOffset", "long"),
    _nullable("baseFile", "string"),
    _nullable("logFiles", {"type": "array", "items": "string", "default": None}),
    _nullable("cdcStats", {"type": "map", "values": "long", "default": None}),
]))
_define(_record("HoodieCommitMetadata", [
    _nullable("partitionToWriteStats", _map(_array("HoodieWriteStat"))),
    _nullable("extraMetadata", {"type": "map", "values": "string", "default": None}),
    _version(),
    _nullable("operationType", "string"),
]))
_define(_record("HoodieReplaceCommitMetadata", [
    _nullable("partitionToWriteStats", _map(_array("HoodieWriteStat"))),
    _nullable("extraMetadata", _map("string")),
    _version(),
    _nullable("operationType", "string"),
    _nullable("partitionToReplaceFileIds", _map(_STRINGS)),
]))

# --- compaction (archived-entry unions only; deprecated metadata and the plan) ---------------
_define(_record("HoodieCompactionWriteStat", [
    _nullable("partitionPath", "string"),
    _nullable("totalLogRecords", "long"),
    _nullable("totalLogFiles", "long"),
    _nullable("totalUpdatedRecordsCompacted", "long"),
    _nullable("hoodieWriteStat", "HoodieWriteStat"),
]))
_define(_record("HoodieCompactionMetadata", [
    _field("partitionToCompactionWriteStats", ["null", _map(_array("HoodieCompactionWriteStat"))]),
]))
_define(_record("HoodieCompactionOperation", [
    _field("baseInstantTime", ["null", "string"]),
    _nullable("deltaFilePaths", _STRINGS),
    _nullable("dataFilePath", "string"),
    _field("fileId", ["null", "string"]),
    _nullable("partitionPath", "string"),
    _nullable("metrics", _map("double")),
    _nullable("bootstrapFilePath", "string"),
]))
_define(_record("HoodieCompactionStrategy", [
    _nullable("compactorClassName", "string"),
    _nullable("strategyParams", _map("string")),
    _version(),
]))
_define(_record("HoodieCompactionPlan", [
    _nullable("operations", _array("HoodieCompactionOperation")),
    _nullable("extraMetadata", _map("string")),
    _version(),
    _nullable("strategy", "HoodieCompactionStrategy"),
    _nullable("preserveHoodieMetadata", "boolean"),
]))

# --- clustering / replace (archived-entry unions only) ---------------------------------------
_define(_record("HoodieSliceInfo", [
    _nullable("dataFilePath", "string"),
    _nullable("deltaFilePaths", _STRINGS),
    _field("fileId", ["null", "string"]),
    _nullable("partitionPath", "string"),
    _nullable("bootstrapFilePath", "string"),
    _version(),
]))
_define(_record("HoodieClusteringGroup", [
    _nullable("slices", _array("HoodieSliceInfo")),
    _nullable("metrics", _map("double")),
    _field("numOutputFileGroups", ["int", "null"], default=1),
    _nullable("extraMetadata", _map("string")),
    _version(),
]))
_define(_record("HoodieClusteringStrategy", [
    _nullable("strategyClassName", "string"),
    _nullable("strategyParams", _map("string")),
    _version(),
]))
_define(_record("HoodieClusteringPlan", [
    _nullable("inputGroups", _array("HoodieClusteringGroup")),
    _nullable("strategy", "HoodieClusteringStrategy"),
    _nullable("extraMetadata", _map("string")),
    _version(),
    _nullable("preserveHoodieMetadata", "boolean"),
]))
_define(_record("HoodieRequestedReplaceMetadata", [
    # Hudi declares these two defaults although they do not match the first union branch.
    _field("operationType", ["null", "string"], default=""),
    _field("clusteringPlan", ["HoodieClusteringPlan", "null"], default=None),
    _nullable("extraMetadata", _map("string")),
    _version(),
]))

# --- async indexing (archived-entry union only) ----------------------------------------------
_define(_record("HoodieIndexPartitionInfo", [
    _version(),
    _nullable("metadataPartitionPath", "string"),
    _nullable("indexUptoInstant", "HoodieInstantInfo"),
]))
_define(_record("HoodieIndexCommitMetadata", [
    _version(),
    _nullable("operationType", "string"),
    _nullable("indexPartitionInfos", _array("HoodieIndexPartitionInfo")),
]))

# --- the archived timeline entry -------------------------------------------------------------
_define(_record("HoodieArchivedMetaEntry", [
    _nullable("hoodieCommitMetadata", "HoodieCommitMetadata"),
    _nullable("hoodieCleanMetadata", "HoodieCleanMetadata"),
    _nullable("hoodieCompactionMetadata", "HoodieCompactionMetadata"),  # deprecated in Hudi
    _nullable("hoodieRollbackMetadata", "HoodieRollbackMetadata"),
    _nullable("hoodieSavePointMetadata", "HoodieSavepointMetadata"),
    _nullable("commitTime", "string"),
    _nullable("actionType", "string"),
    _version(),
    _nullable("hoodieCompactionPlan", "HoodieCompactionPlan"),
    _nullable("hoodieCleanerPlan", "HoodieCleanerPlan"),
    _nullable("actionState", "string"),
    _nullable("hoodieReplaceCommitMetadata", "HoodieReplaceCommitMetadata"),
    _nullable("hoodieRequestedReplaceMetadata", "HoodieRequestedReplaceMetadata"),
    _nullable("HoodieInflightReplaceMetadata", "HoodieCommitMetadata"),
    _nullable("hoodieIndexCommitMetadata", "HoodieIndexCommitMetadata"),
    _nullable("stateTransitionTime", "string"),
]))


def full_name(name: str) -> str:
    """`org.apache.hudi.avro.model.<name>`."""
    return f"{NAMESPACE}.{name}"


def self_contained(name: str) -> Schema:
    """The schema of record `name` with every referenced record inlined at its first use."""
    defined: set[str] = set()

    def inline(node: Any) -> Any:
        if isinstance(node, str):
            short = node.removeprefix(NAMESPACE + ".")
            if short in SCHEMAS:
                if short in defined:
                    return full_name(short)
                return inline(SCHEMAS[short])
            return node
        if isinstance(node, list):
            return [inline(branch) for branch in node]
        if isinstance(node, dict):
            out = copy.copy(node)
            if node.get("type") == "record":
                defined.add(node["name"])
                out["fields"] = [{**f, "type": inline(f["type"])} for f in node["fields"]]
            elif node.get("type") == "array":
                out["items"] = inline(node["items"])
            elif node.get("type") == "map":
                out["values"] = inline(node["values"])
            return out
        return node

    return inline(SCHEMAS[name])  # type: ignore[no-any-return]
