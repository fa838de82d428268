"""Timeline layouts 1 and 2 (engine.timeline.layout) and slicing by completion time (fs_view), pure."""

from __future__ import annotations

import pytest

from engine.errors import CorruptTableError
from engine.table.fs_view import DataFile, FileSystemView
from engine.timeline.instant import Action, Instant, State
from engine.timeline.layout import LAYOUT_1, layout_for
from engine.timeline.timeline import Timeline

L2 = layout_for(8, 2, {}, "archived")
T1, T2, T3, T4 = "20250101000000000", "20250101000001000", "20250101000002000", "20250101000003000"


def test_layout_2_names_a_completed_instant_with_its_completion_time():
    assert (L2.version, L2.folder, L2.history) == (2, ".hoodie/timeline", ".hoodie/timeline/history")
    done = L2.parse(f"{T1}_{T2}.deltacommit")
    assert done == Instant(T1, Action.DELTA_COMMIT, State.COMPLETED)
    assert done.completion_time == T2
    assert L2.file_name(done) == f"{T1}_{T2}.deltacommit"
    assert L2.parse(f"{T1}.inflight") == Instant(T1, Action.COMMIT, State.INFLIGHT)
    assert L2.parse(f"{T1}.clustering.requested") == Instant(T1, Action.CLUSTERING, State.REQUESTED)
    assert L2.parse(f"{T1}.logcompaction.inflight") == Instant(T1, Action.LOG_COMPACTION, State.INFLIGHT)
    for other in ("hoodie.properties", f".{T1}_{T2}.commit.crc", f"{T1}_{T2}.unknown", "history", f"{T1}_x.commit"):
        assert L2.parse(other) is None, other
    with pytest.raises(ValueError, match="no completion time"):
        L2.file_name(Instant(T1, Action.COMMIT, State.COMPLETED))


def test_custom_timeline_folders_and_layout_1():
    custom = layout_for(9, 2, {"hoodie.timeline.path": "tl", "hoodie.timeline.history.path": "old"}, "archived")
    assert (custom.folder, custom.history) == (".hoodie/tl", ".hoodie/tl/old")
    assert layout_for(6, 1, {}, "archived") == LAYOUT_1
    assert LAYOUT_1.parse(f"{T1}.commit") == Instant(T1, Action.COMMIT, State.COMPLETED)
    assert LAYOUT_1.file_name(Instant(T1, Action.COMMIT, State.COMPLETED, T2)) == f"{T1}.commit"


def test_a_timeline_with_both_layouts_mixed_is_refused_naming_the_file():
    with pytest.raises(CorruptTableError, match=rf"\.hoodie/timeline/{T1}\.commit: a completed instant named for "
                                                r"timeline layout 1 in a table of layout 2"):
        L2.parse(f"{T1}.commit")
    with pytest.raises(CorruptTableError, match=rf"\.hoodie/{T1}_{T2}\.commit: .* layout 2 in a table of layout 1"):
        LAYOUT_1.parse(f"{T1}_{T2}.commit")


def test_completion_time_is_not_part_of_an_instants_identity():
    a = Instant(T1, Action.COMMIT, State.COMPLETED, T2)
    assert a == Instant(T1, Action.COMMIT, State.COMPLETED)
    assert a.with_state(State.INFLIGHT).completion_time is None
    assert a.with_state(State.COMPLETED).completion_time == T2


def _timeline(*names: str) -> Timeline:
    return Timeline.from_instants(i for i in map(L2.parse, names) if i is not None)


def _log(fid: str, instant: str, token: str = "0-1-1") -> DataFile:
    return DataFile(f"p/.{fid}_{instant}.log.1_{token}", 10)


def _base(fid: str, instant: str) -> DataFile:
    return DataFile(f"p/{fid}_0-1-1_{instant}.parquet", 100)


FID = "11111111-1111-1111-1111-111111111111-0"


def test_logs_join_the_newest_slice_that_began_before_they_completed():
    # base at T1; a deltacommit requested at T2 completes after the compaction T3 was requested:
    # its log belongs to T3's slice, as does T4's; a log that completed before T3 stays with T1
    tl = _timeline(f"{T1}_{T1[:-3]}100.deltacommit", f"{T2}_{T4[:-3]}500.deltacommit",
                   f"{T3}_{T3[:-3]}900.commit", f"{T4}_{T4[:-3]}700.deltacommit",
                   "20250101000001500_20250101000001600.deltacommit")
    files = [_base(FID, T1), _base(FID, T3), _log(FID, T2), _log(FID, T4), _log(FID, "20250101000001500")]
    view = FileSystemView.build(files, tl)
    (group,) = view.groups
    assert [(s.base_instant, [lf.name.base_instant for lf in s.log_files]) for s in group.slices] == [
        (T1, ["20250101000001500"]),
        (T3, [T2, T4]),  # ordered by completion time
    ]


def test_log_only_slices_and_uncommitted_logs():
    # no base file: the first log starts the slice, later ones join it; a log of a pending
    # deltacommit is not part of the table
    tl = _timeline(f"{T1}_{T1[:-3]}100.deltacommit", f"{T2}_{T2[:-3]}100.deltacommit", f"{T3}.deltacommit.inflight")
    view = FileSystemView.build([_log(FID, T1), _log(FID, T2), _log(FID, T3)], tl)
    (group,) = view.groups
    assert [(s.base_instant, s.base_file, [lf.name.base_instant for lf in s.log_files]) for s in group.slices] == [
        (T1, None, [T1, T2]),
    ]
    # time travel compares the instants the files were written at
    (early,) = FileSystemView.build([_log(FID, T1), _log(FID, T2)], tl, as_of=T1).groups
    assert [[lf.name.base_instant for lf in s.log_files] for s in early.slices] == [[T1]]


def test_an_incremental_window_bounds_completion_times():
    from engine.read.reader import completion_window

    tl = _timeline(f"{T1}_20250101000000500.commit", f"{T2}_20250101000001500.commit",
                   f"{T3}_20250101000002500.commit")
    chosen, lo, hi = completion_window(tl, "20250101000000500", "20250101000001500")
    assert [i.time for i in chosen] == [T2] and (lo, hi) == (T1, T2)
    assert completion_window(tl, "20250101000002500", None) is None
    chosen, lo, hi = completion_window(tl, "0" * 17, None)
    assert [i.time for i in chosen] == [T1, T2, T3] and (lo, hi) == ("0" * 17, T3)


def test_a_window_whose_commits_completed_out_of_order_is_refused():
    from engine.errors import UnsupportedFeatureError
    from engine.read.reader import completion_window

    # T2 began between T1 and T3 but completed after the window (a concurrent writer): the
    # window holds T1 and T3, which no range of commit times holds without T2
    tl = _timeline(f"{T1}_20250101000002500.commit", f"{T2}_20250101000009000.commit",
                   f"{T3}_20250101000002800.commit")
    with pytest.raises(UnsupportedFeatureError, match=rf"commits {T2} began inside it but completed outside it"):
        completion_window(tl, "20250101000002000", "20250101000003000")
    # a commit that began before the window's first and completed after it is simply left out
    tl = _timeline(f"{T1}_20250101000009000.commit", f"{T2}_20250101000002500.commit")
    chosen, lo, hi = completion_window(tl, "20250101000002000", "20250101000003000")
    assert [i.time for i in chosen] == [T2] and (lo, hi) == (T1, T2)
