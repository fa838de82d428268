"""Pending clustering plans: which requested replacecommits schedule a clustering, and of which groups."""

from __future__ import annotations

import pytest

from engine.errors import CorruptTableError
from engine.table.clustering import parse_requested_replace
from engine.timeline import avro_models


def requested(operation: str | None, slices: list[tuple[str, str]] | None) -> bytes:
    plan = None
    if slices is not None:
        plan = {
            "inputGroups": [
                {"slices": [{"dataFilePath": f"{p}/{f}_0-1-2_20240101000000000.parquet", "deltaFilePaths": [],
                             "fileId": f, "partitionPath": p, "bootstrapFilePath": "", "version": 1}],
                 "metrics": {}, "numOutputFileGroups": 1, "extraMetadata": None, "version": 1}
                for p, f in slices
            ],
            "strategy": {"strategyClassName": "org.apache.hudi.client.clustering.run.strategy."
                                              "SparkSortAndSizeExecutionStrategy", "strategyParams": {}, "version": 1},
            "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True,
        }
    return avro_models.serialize("HoodieRequestedReplaceMetadata", {
        "operationType": operation, "clusteringPlan": plan, "extraMetadata": {}, "version": 1,
    })


def test_a_clustering_plan_names_its_input_groups():
    data = requested("CLUSTER", [("paris", "g1-0"), ("rome", "g2-0"), ("", "g3-0")])
    assert parse_requested_replace(data) == frozenset({("paris", "g1-0"), ("rome", "g2-0"), ("", "g3-0")})


def test_insert_overwrite_and_empty_files_are_not_clusterings():
    assert parse_requested_replace(b"") is None  # what insert_overwrite leaves in Hudi 0.x
    assert parse_requested_replace(requested("INSERT_OVERWRITE", None)) is None
    assert parse_requested_replace(requested(None, None)) is None


def test_an_unreadable_plan_is_a_corrupt_table_error():
    with pytest.raises(CorruptTableError):
        parse_requested_replace(b"Obj\x01garbage")
