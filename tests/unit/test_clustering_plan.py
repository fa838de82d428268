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


# ---- the size-based planner (pure) ---------------------------------------------------------------
from datetime import datetime  # noqa: E402

from engine.config.clustering_config import ClusteringConfig  # noqa: E402
from engine.errors import InvalidConfigError  # noqa: E402
from engine.table.clustering_plan import (  # noqa: E402
    ClusteringPlan,
    SliceInput,
    filter_partitions,
    metrics,
    plan_groups,
    plan_partition,
)

MB = 1024 * 1024


def _slice(fid: str, mb: float, logs: tuple[int, ...] = (), partition: str = "p") -> SliceInput:
    base = f"{fid}_0-1-2_20240101000000000.parquet" if mb else None
    names = tuple(f".{fid}_20240101000000000.log.{i + 1}_0-1-2" for i in range(len(logs)))
    return SliceInput(partition, fid, base, names, int(mb * MB), logs)


def _config(**options: str) -> ClusteringConfig:
    return ClusteringConfig.from_options({f"hoodie.clustering.plan.strategy.{k.replace('_', '.')}": v
                                          for k, v in options.items()})


def test_slices_are_packed_largest_first_into_groups_up_to_the_byte_limit():
    # as PartitionAwareClusteringPlanStrategy.buildClusteringGroupsForPartition: sorted by base size
    # (descending), a new group when the next slice would pass max.bytes.per.group
    c = _config(max_bytes_per_group=str(100 * MB), target_file_max_bytes=str(30 * MB), small_file_limit=str(70 * MB))
    slices = [_slice("a", 10), _slice("b", 60), _slice("c", 50), _slice("d", 80), _slice("e", 30)]
    groups = plan_partition(slices, c, max_file_size=120 * MB)
    # d (80 MB) is not under the small-file limit; in size order b (60), then c would pass 100 MB:
    # a new group of c, e and a (90 MB)
    assert [[s.file_id for s in g.slices] for g in groups] == [["b"], ["c", "e", "a"]]
    assert [g.output_groups for g in groups] == [2, 3]  # ceil(60 / 30), ceil(90 / 30)
    # a log-only slice counts as hoodie.parquet.max.file.size
    only_logs = plan_partition([_slice("l", 0, (5,)), _slice("a", 1)], c, max_file_size=40 * MB)
    assert [[s.file_id for s in g.slices] for g in only_logs] == [["l", "a"]] and only_logs[0].output_groups == 2


def test_single_slice_groups_and_the_group_limit():
    one = [_slice("a", 1)]
    assert len(plan_partition(one, _config(), 120 * MB)) == 1  # single.group.clustering.enabled: true
    assert plan_partition(one, _config(single_group_clustering_enabled="false"), 120 * MB) == []
    assert len(plan_partition(one, _config(single_group_clustering_enabled="false", sort_columns="x"), 120 * MB)) == 1
    c = _config(max_bytes_per_group=str(MB), max_num_groups="2")
    groups = plan_partition([_slice(f"s{i}", 1) for i in range(5)], c, 120 * MB)
    assert len(groups) == 2
    parts = {f"p{i}": [_slice(f"s{i}", 1, partition=f"p{i}"), _slice(f"t{i}", 1, partition=f"p{i}")] for i in range(4)}
    assert [g.partition for g in plan_groups(parts, _config(max_num_groups="3"), 120 * MB)] == ["p0", "p1", "p2"]


def test_partition_filters_as_hudi_selects_them():
    parts = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "other"]
    assert filter_partitions(parts, _config()) == parts
    assert filter_partitions(parts, _config(partition_regex_pattern="2024-.*")) == parts[:4]
    assert filter_partitions(parts, _config(partition_selected="a,b")) == ["a", "b"]
    mode = "hoodie.clustering.plan.partition.filter.mode"
    recent = ClusteringConfig.from_options({mode: "RECENT_DAYS", "hoodie.clustering.plan.strategy.daybased.lookback.partitions": "2",
                                            "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions": "1"})
    assert filter_partitions(parts, recent) == ["2024-01-04", "2024-01-03"]  # newest first, "other" skipped
    selected = ClusteringConfig.from_options({mode: "SELECTED_PARTITIONS",
                                              "hoodie.clustering.plan.strategy.cluster.begin.partition": "2024-01-02",
                                              "hoodie.clustering.plan.strategy.cluster.end.partition": "2024-01-03"})
    assert filter_partitions(parts, selected) == ["2024-01-02", "2024-01-03"]
    rolling = ClusteringConfig.from_options({mode: "DAY_ROLLING"})
    assert filter_partitions(parts, rolling, now=datetime(2026, 1, 1, 3)) == ["2024-01-04"]  # index 3 at 03:00
    with pytest.raises(InvalidConfigError, match="filter.mode"):
        ClusteringConfig.from_options({mode: "WEEKLY"})


def test_metrics_and_the_stored_plan_round_trip():
    slices = [_slice("a", 3, (MB, 2 * MB)), _slice("b", 0, (MB,))]
    assert metrics(slices, 120 * MB) == {"TOTAL_IO_READ_MB": 7.0, "TOTAL_IO_WRITE_MB": 123.0, "TOTAL_IO_MB": 130.0,
                                         "TOTAL_LOG_FILES_SIZE": float(4 * MB), "TOTAL_LOG_FILES": 3.0}
    groups = plan_partition(slices, _config(sort_columns="x,y"), 120 * MB)
    plan = ClusteringPlan("20240102000000000", tuple(groups), {"hoodie.clustering.plan.strategy.sort.columns": "x,y"})
    record = plan.to_record(lambda rel: f"s3://bucket/t/{rel}")
    data = avro_models.serialize("HoodieRequestedReplaceMetadata", record)
    assert parse_requested_replace(data) == frozenset({("p", "a"), ("p", "b")})
    back = ClusteringPlan.from_record(avro_models.deserialize("HoodieRequestedReplaceMetadata", data), plan.instant)
    assert back.sort_columns == ["x", "y"] and back.file_groups == plan.file_groups
    assert [(s.base_file, s.log_files) for g in back.groups for s in g.slices] == [
        (s.base_file, s.log_files) for g in groups for s in g.slices]
    stored = next(s for s in record["clusteringPlan"]["inputGroups"][0]["slices"] if s["fileId"] == "a")
    assert stored["dataFilePath"] == "s3://bucket/t/p/a_0-1-2_20240101000000000.parquet"
    assert stored["deltaFilePaths"][0] == "s3://bucket/t/p/.a_20240101000000000.log.1_0-1-2"
    with pytest.raises(CorruptTableError, match="does not hold a clustering plan"):
        ClusteringPlan.from_record({"operationType": "INSERT_OVERWRITE", "clusteringPlan": None}, "x")
