"""engine.write.planner on merge-on-read tables: Apache Hudi's rules for appends and small files."""

from __future__ import annotations

import itertools

from engine.write.planner import ExistingFile, InsertRange, MergeOnReadRules, PartitionWorkload, plan_writes

B0, C1 = "20240101000000000", "20240102000000000"
MB = 1 << 20
BLOOM = MergeOnReadRules(can_index_log_files=False)
RECORD = MergeOnReadRules(can_index_log_files=True)


def ids():
    counter = itertools.count()
    return lambda: f"new-{next(counter)}"


def slice_(fid: str, size: int, logs: tuple[tuple[str, int], ...] = (), pending: str | None = None) -> ExistingFile:
    return ExistingFile(
        "p", fid, B0, f"p/{fid}_0-1-2_{B0}.parquet", size,
        log_size=sum(n for _name, n in logs), log_names=tuple(name for name, _n in logs),
        log_base_instant=pending, pending_compaction=pending is not None,
    )


def plan(files, wl, rules, **kw):
    return plan_writes([wl], {"p": files}, max_file_size=kw.get("max", 10 * MB), small_file_limit=kw.get("small", 5 * MB),
                       record_size=kw.get("record", MB), new_file_id=ids(), mor=rules)


def test_updates_are_appended_to_the_slice_they_live_in():
    files = [slice_("a", 8 * MB, ((".a_x.log.1_0-1-1", 100),)), slice_("b", 9 * MB)]
    p = plan(files, PartitionWorkload("p", 0, {"a": 3, "b": 2}, {"b": 1}), BLOOM)
    assert [(b.file_id, b.append, b.log_base_instant, b.log_names, b.planned_updates, b.planned_deletes)
            for b in p.buckets] == [
        ("a", True, B0, (".a_x.log.1_0-1-1",), 3, 0),
        ("b", True, B0, (), 2, 1),
    ]


def test_bloom_packs_inserts_into_the_smallest_base_only_slice_by_merging_it():
    # c has logs (never a candidate without log indexing); a and b are base-only and small; limit 1
    files = [slice_("a", 3 * MB), slice_("b", 2 * MB), slice_("c", 1 * MB, ((".c.log.1_0-1-1", 10),))]
    p = plan(files, PartitionWorkload("p", 12, {"a": 1}), BLOOM)
    kinds = [(b.file_id, b.append, b.planned_inserts, b.planned_updates) for b in p.buckets]
    # a: appended updates; b: the one candidate, 8 inserts (10 MB - 2 MB) merged into a new base file;
    # the last 4 inserts open a new file group
    assert kinds == [("a", True, 0, 1), ("b", False, 8, 0), ("new-0", False, 4, 0)]
    assert p.insert_ranges["p"] == (InsertRange(0, 8, 1), InsertRange(8, 12, 2))


def test_an_index_that_reads_logs_appends_inserts_to_any_small_slice():
    # sizes as counted: a 6 MB + 0.35 x 4 MB = 7.4 MB; b 9 MB; c 9.8 MB (not small: 10 MB max)
    files = [slice_("a", 6 * MB, ((".a.log.1_0-1-1", 4 * MB),)), slice_("b", 9 * MB),
             slice_("c", 9 * MB, ((".c.log.1_0-1-1", 3 * MB),))]
    p = plan(files, PartitionWorkload("p", 4), RECORD)
    assert [(b.file_id, b.append, b.planned_inserts) for b in p.buckets] == [("a", True, 2), ("b", True, 1),
                                                                             ("new-0", False, 1)]


def test_pending_compaction_groups_take_no_inserts_and_append_to_a_new_slice():
    # the slice C1 started on b already has one log file: the next one follows it
    files = [slice_("a", 1 * MB, pending=C1), slice_("b", 1 * MB, ((f".b_{C1}.log.1_0-1-1", 10),), pending=C1)]
    for rules in (BLOOM, RECORD):
        p = plan(files, PartitionWorkload("p", 2, {"b": 1}), rules)
        assert [(b.file_id, b.append, b.log_base_instant, b.log_names, b.planned_inserts) for b in p.buckets] == [
            ("b", True, C1, (f".b_{C1}.log.1_0-1-1",), 0),
            ("new-0", False, None, (), 2),
        ]


def test_small_file_limit_zero_disables_packing_without_log_indexing():
    p = plan([slice_("a", 1)], PartitionWorkload("p", 2), BLOOM, small=0)
    assert [(b.file_id, b.append, b.planned_inserts) for b in p.buckets] == [("new-0", False, 2)]
