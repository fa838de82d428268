"""Hudi's Avro timeline metadata: one-record container files, builders, errors."""

from __future__ import annotations

import json

import pytest

from engine.errors import CorruptTableError, InvalidInputError
from engine.timeline import avro_models as am
from engine.timeline.avro_schemas import NAMESPACE, SCHEMAS, self_contained
from engine.timeline.commit_metadata import CommitMetadata, WriteStat

T0 = "20240501101500123"
T1 = "20240501103000456"
T2 = "20240501110000789"
BASE = "file:/data/trips"


def _rollback_metadata() -> dict:
    return am.rollback_metadata(
        T2,
        1234,
        [(T1, "commit")],
        [
            am.RollbackPartitionStat(
                "city=paris",
                deleted=(f"{BASE}/city=paris/a1b2-0_0-10-20_{T1}.parquet",),
                failed=(),
            ),
            am.RollbackPartitionStat(
                "city=rome",
                deleted=(),
                log_files={f"{BASE}/city=rome/.c3d4-0_{T0}.log.1_0-5-6": 812},
            ),
        ],
    )


def _clean_metadata() -> dict:
    return am.clean_metadata(
        T2, 87, T1, T1, am.KEEP_LATEST_COMMITS,
        [am.CleanPartitionStat(
            "city=paris",
            delete_patterns=(f"a1b2-0_0-3-4_{T0}.parquet",),
            deleted=(f"a1b2-0_0-3-4_{T0}.parquet",),
        )],
    )


MODELS: dict[str, dict] = {
    "HoodieRollbackPlan": am.rollback_plan(
        T1, "commit",
        [am.RollbackRequest("city=paris", "", "", (f"{BASE}/city=paris/a1b2-0_0-10-20_{T1}.parquet",)),
         am.RollbackRequest("city=rome", "c3d4-0", T0, (), {f"{BASE}/city=rome/.c3d4-0_{T0}.log.1_0-5-6": 812})],
    ),
    "HoodieRollbackMetadata": _rollback_metadata(),
    "HoodieCleanerPlan": am.cleaner_plan(
        (T1, "commit", "COMPLETED"), T2, am.KEEP_LATEST_COMMITS,
        {"city=paris": [f"{BASE}/city=paris/a1b2-0_0-3-4_{T0}.parquet"]},
    ),
    "HoodieCleanMetadata": _clean_metadata(),
    "HoodieSavepointMetadata": am.savepoint_metadata(
        "alice", 1714557600123, "before the backfill",
        {"city=paris": [f"a1b2-0_0-10-20_{T1}.parquet"], "city=rome": []},
    ),
    "HoodieRestorePlan": am.restore_plan([(T2, "deltacommit"), (T1, "commit")]),
    "HoodieRestoreMetadata": am.restore_metadata(
        "20240502000000000", 4321, [(T1, "commit")], {T1: [_rollback_metadata()]},
    ),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_round_trip(model: str) -> None:
    record = MODELS[model]
    data = am.serialize(model, record)
    assert am.deserialize(model, data) == record


@pytest.mark.parametrize("model", sorted(MODELS))
def test_container_file_embeds_the_hudi_schema(model: str) -> None:
    data = am.serialize(model, MODELS[model])
    assert data[:4] == b"Obj\x01"
    schema = am.embedded_schema(data)
    # fastavro writes the full name into "name" (no separate "namespace"): the same Avro full name
    full = schema["name"] if "." in schema["name"] else f'{schema["namespace"]}.{schema["name"]}'
    assert full == f"{NAMESPACE}.{model}"
    assert [f["name"] for f in schema["fields"]] == [f["name"] for f in SCHEMAS[model]["fields"]]


def test_rollback_metadata_fields() -> None:
    md = MODELS["HoodieRollbackMetadata"]
    assert md["totalFilesDeleted"] == 1
    assert md["commitsRollback"] == [T1]
    assert md["instantsRollback"] == [{"commitTime": T1, "action": "commit"}]
    assert md["partitionMetadata"]["city=paris"]["rollbackLogFiles"] is None
    assert md["partitionMetadata"]["city=rome"]["rollbackLogFiles"] == {
        f"{BASE}/city=rome/.c3d4-0_{T0}.log.1_0-5-6": 812
    }
    assert md["version"] == 1


def test_cleaner_plan_fields() -> None:
    plan = MODELS["HoodieCleanerPlan"]
    assert plan["version"] == 2
    assert plan["policy"] == "KEEP_LATEST_COMMITS"
    assert plan["earliestInstantToRetain"] == {"timestamp": T1, "action": "commit", "state": "COMPLETED"}
    assert plan["filesToBeDeletedPerPartition"] == {}
    assert plan["filePathsToBeDeletedPerPartition"] == {
        "city=paris": [{"filePath": f"{BASE}/city=paris/a1b2-0_0-3-4_{T0}.parquet", "isBootstrapBaseFile": False}]
    }


def test_clean_metadata_fields() -> None:
    md = MODELS["HoodieCleanMetadata"]
    assert (md["startCleanTime"], md["earliestCommitToRetain"], md["lastCompletedCommitTimestamp"]) == (T2, T1, T1)
    assert md["totalFilesDeleted"] == 1
    assert md["version"] == 2
    assert md["partitionMetadata"]["city=paris"]["policy"] == "KEEP_LATEST_COMMITS"
    assert md["bootstrapPartitionMetadata"] == {}


def test_unknown_cleaning_policy_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="KEEP_NEWEST"):
        am.clean_metadata(T2, 1, "", T1, "KEEP_NEWEST", [])


def test_serialize_names_the_bad_field() -> None:
    bad = dict(MODELS["HoodieSavepointMetadata"], savepointedAt="yesterday")
    with pytest.raises(InvalidInputError, match="savepointedAt"):
        am.serialize("HoodieSavepointMetadata", bad)


def test_serialize_names_a_missing_required_field() -> None:
    bad = {k: v for k, v in MODELS["HoodieCleanMetadata"].items() if k != "startCleanTime"}
    with pytest.raises(InvalidInputError, match="startCleanTime"):
        am.serialize("HoodieCleanMetadata", bad)


def test_unknown_model() -> None:
    with pytest.raises(InvalidInputError, match="HoodieNothing"):
        am.serialize("HoodieNothing", {})


@pytest.mark.parametrize(
    "data",
    [b"", b"Obj", b"Obj\x01", b"garbage that is not avro", b"#HUDI#\x00\x00"],
    ids=["empty", "magic-only", "header-only", "garbage", "log-block"],
)
def test_deserialize_rejects_non_container_bytes(data: bytes) -> None:
    with pytest.raises(CorruptTableError):
        am.deserialize("HoodieCleanMetadata", data)


def test_deserialize_rejects_truncated_file() -> None:
    data = am.serialize("HoodieCleanMetadata", MODELS["HoodieCleanMetadata"])
    for cut in (len(data) // 2, len(data) - 20, len(data) - 1):
        with pytest.raises(CorruptTableError):
            am.deserialize("HoodieCleanMetadata", data[:cut])


def test_deserialize_rejects_another_model() -> None:
    data = am.serialize("HoodieRestorePlan", MODELS["HoodieRestorePlan"])
    with pytest.raises(CorruptTableError, match="expected a HoodieRollbackPlan file, found a .*HoodieRestorePlan"):
        am.deserialize("HoodieRollbackPlan", data)


def test_commit_metadata_to_avro_as_hudi_archives_it() -> None:
    stat = WriteStat(
        fileId="a1b2-0", path=f"city=paris/a1b2-0_0-10-20_{T1}.parquet", partitionPath="city=paris",
        prevCommit=T0, numWrites=10, numUpdateWrites=2, numInserts=8, totalWriteBytes=4096, fileSizeInBytes=4096,
    )
    log_stat = WriteStat(
        fileId="c3d4-0", path=f"city=rome/.c3d4-0_{T0}.log.1_0-5-6", partitionPath="city=rome",
        baseFile=f"c3d4-0_0-1-2_{T0}.parquet", logFiles=[f".c3d4-0_{T0}.log.1_0-5-6"], logVersion=1, logOffset=0,
    )
    cm = CommitMetadata({"city=paris": [stat], "city=rome": [log_stat]}, "UPSERT", {"schema": '{"type":"record"}'})
    avro = am.commit_metadata_to_avro(cm)
    assert avro["operationType"] == "UPSERT"
    assert avro["version"] is None
    assert avro["extraMetadata"] == {"schema": '{"type":"record"}', "ROLLING_STAT": ""}
    paris = avro["partitionToWriteStats"]["city=paris"][0]
    assert (paris["fileId"], paris["prevCommit"], paris["numWrites"], paris["numInserts"]) == ("a1b2-0", T0, 10, 8)
    assert paris["totalLogFiles"] is None and paris["baseFile"] is None
    rome = avro["partitionToWriteStats"]["city=rome"][0]
    assert (rome["baseFile"], rome["logFiles"], rome["logVersion"]) == (
        f"c3d4-0_0-1-2_{T0}.parquet", [f".c3d4-0_{T0}.log.1_0-5-6"], 1)
    am.validate_record("HoodieCommitMetadata", avro)
    assert am.deserialize("HoodieCommitMetadata", am.serialize("HoodieCommitMetadata", avro)) == avro


def test_compacted_commit_is_archived_as_compact() -> None:
    avro = am.commit_metadata_to_avro(CommitMetadata({}, "UPSERT", {}, compacted=True))
    assert avro["operationType"] == "COMPACT"


def _named_definitions(node: object, seen: list[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "record":
            seen.append(node["name"])
        for value in node.values():
            _named_definitions(value, seen)
    elif isinstance(node, list):
        for value in node:
            _named_definitions(value, seen)


def test_archived_entry_schema_defines_each_record_once() -> None:
    schema = self_contained("HoodieArchivedMetaEntry")
    seen: list[str] = []
    _named_definitions(schema, seen)
    assert len(seen) == len(set(seen))
    assert {"HoodieCommitMetadata", "HoodieWriteStat", "HoodieCleanMetadata", "HoodieCleanPartitionMetadata",
            "HoodieRollbackMetadata", "HoodieInstantInfo", "HoodieSavepointMetadata", "HoodieCompactionPlan",
            "HoodieCleanerPlan", "HoodieReplaceCommitMetadata", "HoodieRequestedReplaceMetadata",
            "HoodieClusteringPlan", "HoodieIndexCommitMetadata"} <= set(seen)
    assert [f["name"] for f in schema["fields"]] == [
        "hoodieCommitMetadata", "hoodieCleanMetadata", "hoodieCompactionMetadata", "hoodieRollbackMetadata",
        "hoodieSavePointMetadata", "commitTime", "actionType", "version", "hoodieCompactionPlan",
        "hoodieCleanerPlan", "actionState", "hoodieReplaceCommitMetadata", "hoodieRequestedReplaceMetadata",
        "HoodieInflightReplaceMetadata", "hoodieIndexCommitMetadata", "stateTransitionTime",
    ]
    json.dumps(schema)  # plain JSON, ready for a log block header


def test_every_schema_parses() -> None:
    for name in SCHEMAS:
        am.parsed_schema(name)
