"""engine.table.fs_view and engine.timeline.commit_metadata: file slices from listings, commit JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.data.file_group import FileSlice
from engine.errors import CorruptTableError
from engine.table.fs_view import DataFile, FileSystemView
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.timeline import Timeline
from tests.support.samples import sample_table

T0 = "20240101000000000"  # older than the timeline (archived)
T1 = "20240101000000001"
T2 = "20240101000000002"
T3 = "20240101000000003"  # inflight
T4 = "20240101000000004"

F1 = "11111111-1111-4111-8111-111111111111-0"
F2 = "22222222-2222-4222-8222-222222222222-0"
F3 = "33333333-3333-4333-8333-333333333333-0"


def base(partition: str, file_id: str, instant: str, token: str = "0-1-2", size: int = 100) -> DataFile:
    name = f"{file_id}_{token}_{instant}.parquet"
    return DataFile(f"{partition}/{name}" if partition else name, size)


def log(
    partition: str, file_id: str, instant: str, version: int, token: str = "0-9-9", size: int = 10
) -> DataFile:
    name = f".{file_id}_{instant}.log.{version}_{token}"
    return DataFile(f"{partition}/{name}" if partition else name, size)


def timeline() -> Timeline:
    return Timeline.from_file_names(
        [
            f"{T1}.commit.requested",
            f"{T1}.inflight",
            f"{T1}.commit",
            f"{T2}.commit.requested",
            f"{T2}.inflight",
            f"{T2}.commit",
            f"{T3}.commit.requested",
            f"{T3}.inflight",
        ]
    )


def latest_paths(view: FileSystemView, partitions: list[str] | None = None) -> list[str]:
    return [b.path for b in view.latest_base_files(partitions)]


def test_data_file_partition_and_name() -> None:
    assert DataFile("a=1/b=x/f.parquet", 5).partition == "a=1/b=x"
    assert DataFile("a=1/b=x/f.parquet", 5).name == "f.parquet"
    assert DataFile("f.parquet", 5).partition == ""
    assert DataFile("f.parquet", 5).name == "f.parquet"


def test_latest_slice_per_file_group_and_inflight_hidden() -> None:
    files = [
        base("p", F1, T1, size=101),
        base("p", F1, T2, size=102),
        base("p", F1, T3, size=103),  # inflight: hidden
        base("p", F2, T1, size=201),
        base("q", F3, T3),  # only an inflight file: no group at all
        DataFile("p/.hoodie_partition_metadata", 96),  # not a data file
        DataFile("p/.DS_Store", 6148),
    ]
    view = FileSystemView.build(files, timeline())
    assert [(g.partition, g.file_id) for g in view.groups] == [("p", F1), ("p", F2)]
    assert view.partitions == ["p"]
    g1 = view.group("p", F1)
    assert [s.base_instant for s in g1.slices] == [T1, T2]
    assert g1.latest_slice.base_file.path == f"p/{F1}_0-1-2_{T2}.parquet"
    assert g1.latest_slice.base_file.size == 102
    assert latest_paths(view) == [f"p/{F1}_0-1-2_{T2}.parquet", f"p/{F2}_0-1-2_{T1}.parquet"]
    assert latest_paths(view, ["q"]) == []
    assert view.group("q", F3) is None
    assert view.groups_in("p") == list(view.groups)
    assert view.groups_in("q") == []


def test_file_older_than_first_instant_is_visible() -> None:
    view = FileSystemView.build([base("p", F1, T0), base("p", F2, T4)], timeline())
    # T0 predates the timeline (archived commit); T4 is after it and not on it
    assert latest_paths(view) == [f"p/{F1}_0-1-2_{T0}.parquet"]


def test_as_of_time_travel() -> None:
    files = [base("p", F1, T1), base("p", F1, T2), base("p", F2, T2), base("p", F1, T3)]
    tl = timeline()
    assert latest_paths(FileSystemView.build(files, tl, as_of=T1)) == [f"p/{F1}_0-1-2_{T1}.parquet"]
    assert latest_paths(FileSystemView.build(files, tl, as_of=T2)) == [
        f"p/{F1}_0-1-2_{T2}.parquet",
        f"p/{F2}_0-1-2_{T2}.parquet",
    ]
    # as_of past an inflight instant still hides the inflight files
    assert latest_paths(FileSystemView.build(files, tl, as_of=T4)) == [
        f"p/{F1}_0-1-2_{T2}.parquet",
        f"p/{F2}_0-1-2_{T2}.parquet",
    ]
    assert latest_paths(FileSystemView.build(files, tl, as_of=T0)) == []


def test_replaced_file_groups_hidden() -> None:
    tl = Timeline.from_file_names([f"{T1}.commit", f"{T2}.replacecommit"])
    files = [base("p", F1, T1), base("p", F2, T1), base("p", F3, T2), base("q", F1, T1)]
    view = FileSystemView.build(files, tl, replaced={"p": [F1, F2]})
    # only p's F1 is replaced: q's file group with the same id stays
    assert [(g.partition, g.file_id) for g in view.groups] == [("p", F3), ("q", F1)]
    assert latest_paths(view) == [f"p/{F3}_0-1-2_{T2}.parquet", f"q/{F1}_0-1-2_{T1}.parquet"]


@pytest.mark.parametrize("reverse", [False, True])
def test_duplicate_base_files_resolved_toward_committed_paths(reverse: bool) -> None:
    good = base("p", F1, T2, token="0-5-7")
    debris = base("p", F1, T2, token="1-5-9")  # a failed task attempt of the same instant
    files = [base("p", F1, T1), good, debris]
    if reverse:
        files.reverse()
    committed = frozenset({good.path, f"p/{F1}_0-1-2_{T1}.parquet"})
    view = FileSystemView.build(files, timeline(), committed_paths=committed)
    assert latest_paths(view) == [good.path]
    assert [s.base_file.path for s in view.group("p", F1).slices] == [f"p/{F1}_0-1-2_{T1}.parquet", good.path]
    # the other way round
    view = FileSystemView.build(files, timeline(), committed_paths=frozenset({debris.path}))
    assert latest_paths(view) == [debris.path]
    # without commit information the greater name wins, whatever the listing order
    view = FileSystemView.build(files, timeline())
    assert latest_paths(view) == [debris.path]


def test_merge_on_read_slices_with_log_files() -> None:
    tl = Timeline.from_file_names([f"{T1}.deltacommit", f"{T2}.deltacommit", f"{T3}.deltacommit.inflight"])
    files = [
        log("", F1, T1, 2, size=20),
        base("", F1, T1, size=1000),
        log("", F1, T1, 1, size=10),
        log("", F2, T3, 1),  # base instant inflight: hidden
        base("", F3, T2),
    ]
    view = FileSystemView.build(files, tl)
    assert [g.file_id for g in view.groups] == [F1, F3]
    s1 = view.group("", F1).latest_slice
    assert s1.base_instant == T1
    assert s1.base_file.path == f"{F1}_0-1-2_{T1}.parquet"
    assert [lf.path for lf in s1.log_files] == [f".{F1}_{T1}.log.1_0-9-9", f".{F1}_{T1}.log.2_0-9-9"]
    assert [lf.name.version for lf in s1.log_files] == [1, 2]
    assert s1.files == [f"{F1}_0-1-2_{T1}.parquet", f".{F1}_{T1}.log.1_0-9-9", f".{F1}_{T1}.log.2_0-9-9"]
    assert s1.size == 1030
    assert view.partitions == [""]


def test_log_only_file_group_has_no_base_file() -> None:
    tl = Timeline.from_file_names([f"{T1}.deltacommit"])
    view = FileSystemView.build([log("p", F1, T1, 1, size=7)], tl)
    s = view.group("p", F1).latest_slice
    assert s == FileSlice("p", F1, T1, None, s.log_files)
    assert s.files == [f"p/.{F1}_{T1}.log.1_0-9-9"]
    assert s.size == 7
    assert view.latest_base_files() == []
    assert view.latest_slices() == [s]


# ---- the samples --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hudi-samples-fsview")


def _listing(table: Path) -> tuple[list[DataFile], Timeline]:
    files = []
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for n in names:
            full = Path(root) / n
            files.append(DataFile(full.relative_to(table).as_posix(), full.stat().st_size))
    return files, Timeline.from_file_names(os.listdir(table / ".hoodie"))


SAMPLE_LATEST = {
    "cow_v6_simplekeygen_nonhivestyle": [
        "10/97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_0-119-166_20240418172804498.parquet",
        "20/76e0556b-390d-4249-b7ad-9059e2bc2cbd-0_0-98-141_20240418172802262.parquet",
        "30/6db57019-98ee-480e-8eb1-fb3de48e1c24-0_1-119-167_20240418172804498.parquet",
    ],
    "cow_v6_complexkeygen_hivestyle": [
        "byteField=10/shortField=300/a22e8257-e249-45e9-ba46-115bc85adcba-0_0-161-223_20240418173235694.parquet",
        "byteField=20/shortField=100/bb7c3a45-387f-490d-aab2-981c3f1a8ada-0_0-140-198_20240418173213674.parquet",
        "byteField=30/shortField=100/4668e35e-bff8-4be9-9ff2-e7fb17ecb1a7-0_1-161-224_20240418173235694.parquet",
    ],
    "cow_v6_nonpartitioned": [
        "a079bdb3-731c-4894-b855-abfcd6921007-0_0-203-274_20240418173551906.parquet",
    ],
    "cow_v6_empty": [],
}


@pytest.mark.parametrize("sample", sorted(SAMPLE_LATEST))
def test_sample_cow_latest_base_files(sample: str, unpacked: Path) -> None:
    files, tl = _listing(sample_table(sample, unpacked))
    view = FileSystemView.build(files, tl)
    assert sorted(latest_paths(view)) == SAMPLE_LATEST[sample]
    assert all(not s.log_files for s in view.latest_slices())


def test_sample_cow_time_travel(unpacked: Path) -> None:
    files, tl = _listing(sample_table("cow_v6_simplekeygen_nonhivestyle", unpacked))
    view = FileSystemView.build(files, tl, as_of="20240418172802262")
    assert sorted(latest_paths(view)) == [
        "10/97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet",
        "20/76e0556b-390d-4249-b7ad-9059e2bc2cbd-0_0-98-141_20240418172802262.parquet",
    ]


def test_sample_mor_slices(unpacked: Path) -> None:
    files, tl = _listing(sample_table("mor_parquet_v6_simplekeygen_nonhivestyle", unpacked))
    view = FileSystemView.build(files, tl)
    assert [(s.partition, s.file_id, s.base_instant, s.files) for s in view.latest_slices()] == [
        (
            "10",
            "26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0",
            "20250121000547796",
            [
                "10/26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_1-13-25_20250121000547796.parquet",
                "10/.26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_20250121000547796.log.1_0-33-47",
            ],
        ),
        (
            "20",
            "b2506c0e-8ddb-48c0-a683-a1d7d13cae0f-0",
            "20250121000547796",
            [
                "20/b2506c0e-8ddb-48c0-a683-a1d7d13cae0f-0_0-13-24_20250121000547796.parquet",
            ],
        ),
        (
            "30",
            "a3ecc652-e61d-4fec-b219-7acbc16ec864-0",
            "20250121000557095",
            [
                "30/a3ecc652-e61d-4fec-b219-7acbc16ec864-0_1-33-48_20250121000557095.parquet",
            ],
        ),
    ]


# ---- CommitMetadata ------------------------------------------------------------------------------

# (sample, commit file) -> (operation, totals)
SAMPLE_COMMITS = {
    ("cow_v6_complexkeygen_hivestyle", "20240418173213674.commit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=3, inserts=3, updates=0, deletes=0, bytes=883153),
    ),
    ("cow_v6_complexkeygen_hivestyle", "20240418173235694.commit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=3, inserts=1, updates=1, deletes=0, bytes=883112),
    ),
    ("cow_v6_nonpartitioned", "20240418173550988.commit"): (
        "UPSERT",
        dict(files=1, partitions=1, writes=3, inserts=3, updates=0, deletes=0, bytes=441382),
    ),
    ("cow_v6_nonpartitioned", "20240418173551906.commit"): (
        "UPSERT",
        dict(files=1, partitions=1, writes=4, inserts=1, updates=1, deletes=0, bytes=441520),
    ),
    ("cow_v6_simplekeygen_nonhivestyle", "20240418172802262.commit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=3, inserts=3, updates=0, deletes=0, bytes=882587),
    ),
    ("cow_v6_simplekeygen_nonhivestyle", "20240418172804498.commit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=3, inserts=1, updates=1, deletes=0, bytes=882538),
    ),
    ("mor_parquet_v6_nonpartitioned", "20250117083125837.deltacommit"): (
        "UPSERT",
        dict(files=1, partitions=1, writes=3, inserts=3, updates=0, deletes=0, bytes=440981),
    ),
    ("mor_parquet_v6_nonpartitioned", "20250117083136333.deltacommit"): (
        "UPSERT",
        dict(files=2, partitions=1, writes=2, inserts=1, updates=1, deletes=0, bytes=452339),
    ),
    ("mor_parquet_v6_simplekeygen_nonhivestyle", "20250121000547796.deltacommit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=3, inserts=3, updates=0, deletes=0, bytes=881495),
    ),
    ("mor_parquet_v6_simplekeygen_nonhivestyle", "20250121000557095.deltacommit"): (
        "UPSERT",
        dict(files=2, partitions=2, writes=2, inserts=1, updates=1, deletes=0, bytes=452503),
    ),
    ("trips_mor_avro_v6_trips_8i1u", "20250331030642808.deltacommit"): (
        "UPSERT",
        dict(files=3, partitions=3, writes=8, inserts=8, updates=0, deletes=0, bytes=1308795),
    ),
    ("trips_mor_avro_v6_trips_8i1u", "20250331030645735.deltacommit"): (
        "UPSERT_PREPPED",
        dict(files=1, partitions=1, writes=1, inserts=0, updates=1, deletes=0, bytes=1148),
    ),
}


def test_sample_commit_table_is_complete(unpacked: Path) -> None:
    found = set()
    for sample in {s for s, _ in SAMPLE_COMMITS} | {"cow_v6_empty"}:
        hoodie = sample_table(sample, unpacked) / ".hoodie"
        found |= {
            (sample, n)
            for n in os.listdir(hoodie)
            if n.endswith((".commit", ".deltacommit", ".replacecommit"))
        }
    assert found == set(SAMPLE_COMMITS)


@pytest.mark.parametrize(("sample", "commit"), sorted(SAMPLE_COMMITS))
def test_commit_metadata_from_sample(sample: str, commit: str, unpacked: Path) -> None:
    raw = (sample_table(sample, unpacked) / ".hoodie" / commit).read_bytes()
    meta = CommitMetadata.from_json(raw)
    operation, totals = SAMPLE_COMMITS[(sample, commit)]
    assert meta.operation_type == operation
    assert meta.totals() == totals
    assert meta.compacted is False
    assert meta.partition_to_replace_file_ids is None
    assert meta.schema is not None and json.loads(meta.schema)["type"] == "record"
    # paths and prev commits exactly as in the JSON
    doc = json.loads(raw)
    assert meta.written_paths == [s["path"] for stats in doc["partitionToWriteStats"].values() for s in stats]
    assert [(s.fileId, s.prevCommit, s.partitionPath) for s in meta.write_stats] == [
        (s["fileId"], s["prevCommit"], s["partitionPath"])
        for stats in doc["partitionToWriteStats"].values()
        for s in stats
    ]
    # round trip
    again = CommitMetadata.from_json(meta.to_json())
    assert again == meta
    assert CommitMetadata.from_json(meta.to_bytes()) == meta


def test_commit_metadata_mor_log_stat_fields(unpacked: Path) -> None:
    hoodie = sample_table("trips_mor_avro_v6_trips_8i1u", unpacked) / ".hoodie"
    meta = CommitMetadata.from_json((hoodie / "20250331030645735.deltacommit").read_bytes())
    (stat,) = meta.partition_to_write_stats["city=san_francisco"]
    assert stat == WriteStat(
        fileId="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0",
        path="city=san_francisco/.d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85",
        partitionPath="city=san_francisco",
        prevCommit="20250331030642808",
        numWrites=1,
        numUpdateWrites=1,
        totalWriteBytes=1148,
        fileSizeInBytes=1148,
        baseFile="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet",
        logFiles=[".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"],
        logVersion=1,
        logOffset=0,
        runtimeStats={"totalScanTime": 0, "totalUpsertTime": 296, "totalCreateTime": 0},
    )
    assert meta.extra_metadata["_hoodie.spark.sql.writes.prepped"] == "true"
    d = stat.to_dict()
    assert d["logFiles"] == stat.logFiles and d["baseFile"] == stat.baseFile
    assert d["cdcStats"] is None and d["tempPath"] is None


def test_commit_metadata_cow_stat_has_no_log_fields(unpacked: Path) -> None:
    hoodie = sample_table("cow_v6_nonpartitioned", unpacked) / ".hoodie"
    meta = CommitMetadata.from_json((hoodie / "20240418173551906.commit").read_bytes())
    (stat,) = meta.partition_to_write_stats[""]
    assert stat.prevCommit == "20240418173550988"
    assert stat.path == "a079bdb3-731c-4894-b855-abfcd6921007-0_0-203-274_20240418173551906.parquet"
    d = stat.to_dict()
    for key in ("baseFile", "logFiles", "logVersion", "logOffset"):
        assert key not in d


def test_commit_metadata_hand_made_round_trip() -> None:
    meta = CommitMetadata(
        partition_to_write_stats={
            "p": [
                WriteStat(
                    fileId=F1,
                    path=f"p/{F1}_0-1-2_{T2}.parquet",
                    partitionPath="p",
                    prevCommit=T1,
                    numWrites=5,
                    numUpdateWrites=2,
                    numInserts=3,
                    totalWriteBytes=500,
                    fileSizeInBytes=500,
                )
            ],
            "": [WriteStat(fileId=F2, path=None, partitionPath="", numDeletes=1)],
        },
        operation_type="INSERT_OVERWRITE",
        extra_metadata={"schema": '{"type":"record","name":"r","fields":[]}'},
        partition_to_replace_file_ids={"p": [F3]},
    )
    doc = json.loads(meta.to_json())
    assert doc["operationType"] == "INSERT_OVERWRITE"
    assert doc["partitionToReplaceFileIds"] == {"p": [F3]}
    assert doc["compacted"] is False
    assert doc["partitionToWriteStats"]["p"][0]["prevCommit"] == T1
    assert doc["partitionToWriteStats"][""][0]["prevCommit"] == "null"
    assert CommitMetadata.from_json(meta.to_json()) == meta
    assert meta.totals() == dict(files=1, partitions=2, writes=5, inserts=3, updates=2, deletes=1, bytes=500)
    assert meta.written_paths == [f"p/{F1}_0-1-2_{T2}.parquet"]


def test_commit_metadata_empty_and_bad_json() -> None:
    assert CommitMetadata.from_json(b"") == CommitMetadata()
    assert CommitMetadata.from_json("  \n") == CommitMetadata()
    assert CommitMetadata().totals() == dict(
        files=0, partitions=0, writes=0, inserts=0, updates=0, deletes=0, bytes=0
    )
    with pytest.raises(CorruptTableError):
        CommitMetadata.from_json("{not json")
    with pytest.raises(CorruptTableError):
        CommitMetadata.from_json("[1, 2]")
    # nulls from Java serialisation are tolerated
    meta = CommitMetadata.from_json(
        '{"partitionToWriteStats": {"p": [{"fileId": "f", "path": "p/x", "partitionPath": null,'
        ' "prevCommit": null}]}, "extraMetadata": {"schema": null}, "operationType": null}'
    )
    assert meta.operation_type == "UNKNOWN"
    assert meta.extra_metadata == {}
    (stat,) = meta.write_stats
    assert (stat.partitionPath, stat.prevCommit) == ("", "null")
