"""Merge-on-read table services, pure parts: the compaction plan's Avro form, the file-system view
while a compaction is pending, and clean's slice rules (pending compactions, savepointed slices)."""

from __future__ import annotations

from engine.services.clean import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, files_to_clean
from engine.table.compaction_plan import CompactionOperation, CompactionPlan
from engine.table.fs_view import DataFile, FileSystemView
from engine.timeline import avro_models
from engine.timeline.timeline import Timeline

T1, T2, T3, C4, T5 = (f"2024010100000000{i}" for i in (1, 2, 3, 4, 5))
F = "11111111-1111-4111-8111-111111111111-0"


def base(fid: str, instant: str) -> DataFile:
    return DataFile(f"p/{fid}_0-1-2_{instant}.parquet", 100)


def log(fid: str, base_instant: str, version: int) -> DataFile:
    return DataFile(f"p/.{fid}_{base_instant}.log.{version}_0-9-9", 10)


def mor_timeline(*extra: str) -> Timeline:
    names = []
    for t in (T1, T2, T3):
        names += [f"{t}.deltacommit.requested", f"{t}.deltacommit.inflight", f"{t}.deltacommit"]
    return Timeline.from_file_names(names + list(extra))


def test_plan_round_trips_through_hudis_avro_form() -> None:
    op = CompactionOperation("p", F, T1, f"{F}_0-1-2_{T1}.parquet", (f".{F}_{T1}.log.1_0-9-9",),
                             {"TOTAL_LOG_FILES": 1.0})
    plan = CompactionPlan(C4, (op,))
    record = plan.to_record()
    assert record["version"] == 2 and record["operations"][0]["deltaFilePaths"] == [f".{F}_{T1}.log.1_0-9-9"]
    data = avro_models.serialize("HoodieCompactionPlan", record)
    back = CompactionPlan.from_record(avro_models.deserialize("HoodieCompactionPlan", data), C4)
    assert back == plan
    assert back.operations[0].log_paths == (f"p/.{F}_{T1}.log.1_0-9-9",)
    # version 1 plans held full paths: the names are taken from them
    v1 = dict(record, operations=[dict(record["operations"][0], deltaFilePaths=[f"s3://b/t/p/.{F}_{T1}.log.1_0-9-9"],
                                       dataFilePath=f"s3://b/t/p/{F}_0-1-2_{T1}.parquet")])
    assert CompactionPlan.from_record(v1, C4).operations == plan.operations


def test_view_merges_the_slice_a_pending_compaction_started_with_the_one_it_compacts() -> None:
    files = [base(F, T1), log(F, T1, 1), log(F, T1, 2), log(F, C4, 1)]
    tl = mor_timeline(f"{C4}.compaction.requested")
    # without knowing the plan, a log file based at the pending instant is not visible
    assert [s.base_instant for s in FileSystemView.build(files, tl).groups[0].slices] == [T1]
    view = FileSystemView.build(files, tl, pending_compaction={("p", F): C4})
    g = view.groups[0]
    assert [s.base_instant for s in g.slices] == [T1, C4]
    (merged,) = view.latest_slices()
    assert merged.base_instant == T1 and merged.base_file is not None
    assert [lf.file_name for lf in merged.log_files] == [
        f".{F}_{T1}.log.1_0-9-9", f".{F}_{T1}.log.2_0-9-9", f".{F}_{C4}.log.1_0-9-9"]
    assert view.compaction_pending_on("p", F) == C4
    # once completed, C's base file starts the latest slice with the logs written after it
    done = mor_timeline(f"{C4}.compaction.requested", f"{C4}.compaction.inflight", f"{C4}.commit")
    view = FileSystemView.build([*files, base(F, C4)], done)
    (latest,) = view.latest_slices()
    assert (latest.base_instant, [lf.file_name for lf in latest.log_files]) == (C4, [f".{F}_{C4}.log.1_0-9-9"])


def test_clean_never_deletes_the_slice_a_pending_compaction_reads() -> None:
    files = [base(F, T1), log(F, T1, 1), log(F, C4, 1)]
    tl = mor_timeline(f"{C4}.compaction.requested")
    view = FileSystemView.build(files, tl, pending_compaction={("p", F): C4})
    for policy, retained in ((KEEP_LATEST_COMMITS, 1), (KEEP_LATEST_FILE_VERSIONS, 1)):
        earliest, doomed = files_to_clean(view.groups, [T1, T2, T3, T5], policy, retained,
                                          pending_compaction=view.pending_compaction)
        assert doomed == {}, policy


def test_clean_deletes_whole_slices_and_keeps_savepointed_ones_whole() -> None:
    files = [base(F, T1), log(F, T1, 1), base(F, T2), log(F, T2, 1), base(F, T3)]
    names = []
    for t in (T1, T2, T3):
        names += [f"{t}.deltacommit.requested", f"{t}.deltacommit"]
    view = FileSystemView.build(files, Timeline.from_file_names(names))
    _e, doomed = files_to_clean(view.groups, [T1, T2, T3], KEEP_LATEST_FILE_VERSIONS, 1)
    assert doomed == {"p": sorted([base(F, T1).path, log(F, T1, 1).path, base(F, T2).path, log(F, T2, 1).path])}
    # a savepoint names the base file of T2's slice: the slice stays, log file included
    _e, doomed = files_to_clean(view.groups, [T1, T2, T3], KEEP_LATEST_FILE_VERSIONS, 1,
                                protected=frozenset({base(F, T2).path}))
    assert doomed == {"p": sorted([base(F, T1).path, log(F, T1, 1).path])}
