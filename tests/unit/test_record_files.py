"""RECORD index, pure parts: hashes, file names, state resolution, merging, lookups on local files."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pyarrow as pa
import pytest

from engine.errors import InvalidConfigError
from engine.index.record_files import (
    CompactionPlan,
    IndexFile,
    entries_table,
    lookup,
    merge_entries,
    plan_write_entries,
    read_entries,
    resolve_state,
    write_entries,
)
from engine.keygen.record_hash import (
    bucket_of,
    buckets_of,
    hash_function,
    java_hash_array,
    java_string_hash,
    record_index_properties,
)
from engine.storage import storage_for

# ---- hashes ------------------------------------------------------------------------------
# values of java.lang.String#hashCode
JAVA = {
    "": 0,
    "a": 97,
    "abc": 96354,
    "hello": 99162322,
    "Aa": 2112,
    "BB": 2112,
    "polygenelubricants": -2147483648,  # Integer.MIN_VALUE
    "GydZG_": -2147483648,
    "héllo": 99162322 + (ord("é") - ord("e")) * 31**3,  # "hello" with one code unit changed
    "😀": 1772899,  # U+1F600: surrogates D83D DE00 -> 0xD83D * 31 + 0xDE00
    "key-123": -816674364,
}


@pytest.mark.parametrize("key", sorted(JAVA))
def test_java_string_hash_matches_java(key):
    assert java_string_hash(key) == JAVA[key]
    assert java_hash_array(pa.array([key])).tolist() == [JAVA[key]]


def test_vectorised_hash_equals_scalar_for_mixed_lengths_and_slices():
    rng = random.Random(3)
    alphabet = "abcXYZ019-_é😀"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(2000)]
    arr = pa.array(keys)
    assert java_hash_array(arr).tolist() == [java_string_hash(k) for k in keys]
    assert java_hash_array(arr.slice(7, 50)).tolist() == [java_string_hash(k) for k in keys[7:57]]
    chunked = pa.chunked_array([arr.slice(0, 10), arr.slice(10, 5)])
    assert java_hash_array(chunked).tolist() == [java_string_hash(k) for k in keys[:15]]


def test_bucket_is_abs_of_java_remainder_including_min_value():
    # Math.abs(Math.abs(h) % n): for Integer.MIN_VALUE, abs(h) overflows to MIN_VALUE itself
    assert bucket_of(-(2**31), 10) == 8  # -2147483648 % 10 == -8 in Java
    assert bucket_of(-7, 4) == 3 and bucket_of(7, 4) == 3
    keys = pa.array(["polygenelubricants", "a", "key-123"])
    assert buckets_of(keys, 10).tolist() == [8, 7, 4]  # 97 % 10, |-816674364 % 10|


def test_hash_functions_by_name():
    assert hash_function("java_string_hash") is java_hash_array
    assert hash_function("MURMUR3_32")(pa.array(["a"])).dtype == np.int64
    keys = pa.array(["a", "é", "key-1"])
    assert hash_function("engine.keygen.record_hash:java_hash_array")(keys).tolist() == java_hash_array(keys).tolist()
    with pytest.raises(InvalidConfigError, match="unknown record index hash function 'nope'"):
        hash_function("nope")
    with pytest.raises(InvalidConfigError, match="cannot be imported"):
        hash_function("no.such.module:f")
    assert record_index_properties() == (
        ("hoodie.record.index.buckets", "16"), ("hoodie.record.index.hash.function", "JAVA_STRING_HASH"))
    with pytest.raises(InvalidConfigError, match="positive integer"):
        record_index_properties(0)


# ---- names ---------------------------------------------------------------------------------
def test_file_names_carry_bucket_and_instant():
    delta = IndexFile(3, "20240101120000000")
    base = IndexFile(12, "20240101130000123", is_base=True)
    assert delta.name == "b00003_20240101120000000.arrow"
    assert delta.path == ".hoodie/.record_index/b00003_20240101120000000.arrow"
    assert base.name == "b00012_20240101130000123.base.arrow"
    assert IndexFile.parse(delta.name) == delta and IndexFile.parse(base.name) == base
    assert IndexFile.parse("b00003_20240101120000000.parquet") == IndexFile(3, "20240101120000000", False, ".parquet")
    for other in ("20240101130000123.compaction", ".b00003_20240101120000000.arrow.1a2b.tmp", "b3_2024.arrow"):
        assert IndexFile.parse(other) is None


def test_compaction_plan_round_trips():
    plan = CompactionPlan("20240101130000123", {3: ("b00003_1.arrow",)}, {3: "20240101120000000"})
    assert CompactionPlan.from_bytes(plan.to_bytes()) == plan
    assert plan.base(3).name == "b00003_20240101130000123.base.arrow"


# ---- state ---------------------------------------------------------------------------------
T1, T2, T3, T4, C1, C2 = (f"2024010112000000{i}" for i in range(1, 7))


def test_state_ignores_uncompleted_instants_and_orders_newest_first():
    names = [IndexFile(0, t).name for t in (T1, T2, T3)] + [IndexFile(1, T4).name]
    valid = {T1, T3}.__contains__
    state = resolve_state(names, {}, valid, before=T4)
    assert [f.instant for f in state.bucket(0).deltas] == [T3, T1]
    assert state.bucket(1).sources == []
    # T2 failed before T4 started: orphan; T4 (being written) is not
    assert state.orphan_files == [IndexFile(0, T2).name]
    assert resolve_state(names, {}, valid).orphan_files == sorted([IndexFile(0, T2).name, IndexFile(1, T4).name])


def test_state_uses_a_base_only_once_its_compaction_completed():
    deltas = [IndexFile(0, T1).name, IndexFile(0, T2).name]
    plan = CompactionPlan(C1, {0: tuple(deltas)}, {0: T2})
    base = plan.base(0).name
    names = [*deltas, base, f"{C1}.compaction.requested"]
    valid = {T1, T2}.__contains__
    # interrupted: requested marker only -> the old files stay valid, the base is an orphan
    crashed = resolve_state(names, {}, valid)
    assert [f.instant for f in crashed.bucket(0).sources] == [T2, T1]
    assert crashed.orphan_files == [base] and crashed.orphan_markers == [f"{C1}.compaction.requested"]
    # completed: the base replaces its inputs, which become orphans; markers stay while they vouch
    done = resolve_state([*names, f"{C1}.compaction"], {C1: plan}, valid)
    assert done.bucket(0).sources == [IndexFile(0, C1, is_base=True)] and done.bucket(0).covers == T2
    assert done.orphan_files == sorted(deltas) and done.orphan_markers == []
    # a newer compaction supersedes the old base; the old markers go once nothing is left
    plan2 = CompactionPlan(C2, {0: (base, IndexFile(0, T3).name)}, {0: T3})
    later = [base, plan2.base(0).name, f"{C1}.compaction", f"{C2}.compaction"]
    st = resolve_state(later, {C1: plan, C2: plan2}, {T1, T2, T3}.__contains__)
    assert st.bucket(0).base == plan2.base(0) and st.orphan_files == [base]
    assert st.orphan_markers == [f"{C1}.compaction"]


def test_a_reader_whose_timeline_predates_a_compaction_reads_its_inputs():
    deltas = [IndexFile(0, T1).name, IndexFile(0, T2).name, IndexFile(0, T3).name]
    plan = CompactionPlan(C1, {0: tuple(deltas)}, {0: T3})
    names = [*deltas, plan.base(0).name, f"{C1}.compaction.requested", f"{C1}.compaction"]
    # the writer's (or a newer reader's) timeline has T3: the base counts
    assert resolve_state(names, {C1: plan}, {T1, T2, T3}.__contains__).bucket(0).sources == [plan.base(0)]
    # a reader that loaded its timeline before T3 completed sees T1 and T2 only, as on its timeline
    old = resolve_state(names, {C1: plan}, {T1, T2}.__contains__)
    assert [f.instant for f in old.bucket(0).sources] == [T2, T1]
    # for the writer, T3 was rolled back: the compaction never counts again, its markers and base go
    assert old.orphan_files == sorted([IndexFile(0, T3).name, plan.base(0).name])
    assert old.orphan_markers == sorted([f"{C1}.compaction", f"{C1}.compaction.requested"])


def test_cleanup_keeps_superseded_files_and_their_marker_for_the_retention(tmp_path):
    from datetime import timedelta

    from engine.index.record_service import clean_orphans
    from engine.timeline.instant import parse_instant_time

    storage = storage_for(str(tmp_path))
    deltas = [IndexFile(0, T1), IndexFile(0, T2)]
    plan = CompactionPlan(C1, {0: tuple(f.name for f in deltas)}, {0: T2})
    for f in [*deltas, plan.base(0)]:
        write_entries(storage, f, _entries([("a", "p", "f", False)], f.instant))
    for suffix in (".compaction.requested", ".compaction"):
        storage.write_bytes(f".hoodie/.record_index/{C1}{suffix}", plan.to_bytes())
    names = [f.name for f in storage.list_dir(".hoodie/.record_index")]
    before = resolve_state(names, {}, {T1, T2}.__contains__)  # a reader listed the folder before C1
    state = resolve_state(names, {C1: plan}, {T1, T2}.__contains__)
    assert state.superseded_by == {f.name: C1 for f in deltas}
    # within the retention nothing goes (the completed marker must outlive the files it supersedes)
    just_after = parse_instant_time(C1) + timedelta(seconds=5)
    assert clean_orphans(storage, state, 600, now=just_after) == []
    assert lookup(storage, before, pa.array(["a"]), 1).column("key").to_pylist() == ["a"]  # still readable
    # after it, the inputs go, then the requested marker; the completed marker stays while the base counts
    later = parse_instant_time(C1) + timedelta(seconds=601)
    assert clean_orphans(storage, state, 600, now=later) == sorted(f.name for f in deltas)
    left = sorted(f.name for f in storage.list_dir(".hoodie/.record_index"))
    assert left == sorted([plan.base(0).name, f"{C1}.compaction", f"{C1}.compaction.requested"])


# ---- merging, planning -------------------------------------------------------------------------
def _entries(rows, instant):
    keys, parts, fids, dels = zip(*rows, strict=True) if rows else ((), (), (), ())
    return entries_table(pa.array(keys, pa.string()), pa.array(parts, pa.string()), pa.array(fids, pa.string()),
                         pa.array([instant] * len(rows), pa.string()), pa.array(dels, pa.bool_()))


def test_merge_newest_wins_and_compaction_drops_tombstones():
    old = _entries([("a", "p1", "f1", False), ("b", "p1", "f1", False), ("c", "p2", "f2", False)], T1)
    new = _entries([("a", None, None, True), ("c", "p3", "f3", False), ("d", "p1", "f4", False)], T2)
    merged = merge_entries([new, old], keep_tombstones=True)
    got = {r["key"]: (r["partition"], r["file_id"], r["instant"], r["deleted"]) for r in merged.to_pylist()}
    assert got == {"a": (None, None, T2, True), "b": ("p1", "f1", T1, False), "c": ("p3", "f3", T2, False),
                   "d": ("p1", "f4", T2, False)}
    compacted = merge_entries([new, old], keep_tombstones=False)
    assert sorted(compacted.column("key").to_pylist()) == ["b", "c", "d"]
    h = compacted.column("hash").to_numpy()
    assert (np.diff(h) >= 0).all()  # sorted by hash


def test_write_entries_for_inserts_moves_and_deletes_only():
    keys = pa.array(["new", "upd", "moved", "moved", "gone", "packed"])
    parts = pa.array(["p1", "p1", "p2", "p1", "p1", "p1"])
    fids = pa.array(["f9", "f1", "f7", "f1", "f1", "f1"])
    ops = pa.array(["U", "U", "U", "D", "D", "U"])
    prev = pa.array([None, "f1", None, "f1", "f1", None])
    k, p, f, d = plan_write_entries(keys, parts, fids, ops, prev)
    assert list(zip(k.to_pylist(), p.to_pylist(), f.to_pylist(), d.to_pylist(), strict=True)) == [
        ("new", "p1", "f9", False), ("moved", "p2", "f7", False), ("packed", "p1", "f1", False),
        ("gone", None, None, True),
    ]


# ---- lookups on files ------------------------------------------------------------------------
def test_lookup_newest_entry_wins_and_tombstones_are_absent(tmp_path):
    storage = storage_for(str(tmp_path))
    n = 4
    files = {}
    for instant, rows in ((T1, [("a", "p1", "f1", False), ("b", "p1", "f1", False), ("c", "p1", "f2", False)]),
                          (T2, [("a", None, None, True), ("c", "p2", "f3", False)]),
                          (T3, [("a", "p3", "f4", False)])):  # re-insert after delete
        table = _entries(rows, instant)
        for b in set(buckets_of(table.column("key").combine_chunks(), n).tolist()):
            sub = table.filter(pa.array(buckets_of(table.column("key").combine_chunks(), n) == b))
            f = IndexFile(b, instant)
            write_entries(storage, f, sub)
            files[f.name] = f
    state = resolve_state(list(files), {}, {T1, T2, T3}.__contains__)
    found = lookup(storage, state, pa.array(["a", "b", "c", "d", "e"]), n, threads=2)
    assert sorted(found.to_pylist(), key=lambda r: r["key"]) == [
        {"key": "a", "partition": "p3", "file_id": "f4"},
        {"key": "b", "partition": "p1", "file_id": "f1"},
        {"key": "c", "partition": "p2", "file_id": "f3"},
    ]
    # without T3 (not completed), "a" is deleted
    state = resolve_state(list(files), {}, {T1, T2}.__contains__)
    assert sorted(lookup(storage, state, pa.array(["a", "c"]), n).column("key").to_pylist()) == ["c"]


def test_lookup_handles_colliding_hashes(tmp_path):
    storage = storage_for(str(tmp_path))
    # "Aa" and "BB" (and their concatenations) share a Java hash
    keys = ["AaAa", "AaBB", "BBAa", "BBBB"]
    assert len(set(java_hash_array(pa.array(keys)).tolist())) == 1
    table = _entries([(k, "p", f"f{i}", False) for i, k in enumerate(keys[1:], 1)], T1)
    f = IndexFile(buckets_of(pa.array(["AaAa"]), 1).tolist()[0], T1)
    write_entries(storage, f, table)
    assert read_entries(storage, f).num_rows == 3
    state = resolve_state([f.name], {}, {T1}.__contains__)
    found = lookup(storage, state, pa.array(keys + ["x"]), 1)
    assert sorted((r["key"], r["file_id"]) for r in found.to_pylist()) == [("AaBB", "f1"), ("BBAa", "f2"), ("BBBB", "f3")]


def test_a_plugged_in_hash_outside_the_signed_32_bit_range_still_finds_every_key(tmp_path):
    storage = storage_for(str(tmp_path))
    crc = hash_function("tests.support.hashes:crc32")
    keys = [f"key-{i}" for i in range(300)]
    raw = [zlib.crc32(k.encode()) for k in keys]
    assert max(raw) >= 1 << 31  # some hashes do not fit a signed int
    n = 4
    table = entries_table(pa.array(keys), pa.array(["p"] * 300), pa.array(["f"] * 300),
                          pa.array([T1] * 300), pa.array([False] * 300), crc)
    kb = buckets_of(table.column("key").combine_chunks(), n, crc)
    names = []
    for b in range(n):
        f = IndexFile(b, T1)
        write_entries(storage, f, table.filter(pa.array(kb == b)))
        names.append(f.name)
    state = resolve_state(names, {}, {T1}.__contains__)
    found = lookup(storage, state, pa.array(keys + ["absent"]), n, crc)
    assert sorted(found.column("key").to_pylist()) == sorted(keys)
    with pytest.raises(InvalidConfigError, match="must return one integer per key"):
        hash_function("tests.support.hashes:wrong_length")(pa.array(["a"]))


def test_lookup_matches_brute_force_on_random_files(tmp_path):
    storage = storage_for(str(tmp_path))
    rng = random.Random(7)
    n = 8
    truth: dict[str, tuple[str, str] | None] = {}
    names = []
    for step in range(6):
        instant = f"2024010112000001{step}"
        rows = {}
        for _ in range(300):
            k = f"k{rng.randrange(500)}"
            rows[k] = (k, None, None, True) if rng.random() < 0.3 else (k, f"p{rng.randrange(3)}", f"f{step}", False)
        table = _entries(list(rows.values()), instant)
        kb = buckets_of(table.column("key").combine_chunks(), n)
        for b in range(n):
            f = IndexFile(b, instant)
            write_entries(storage, f, table.filter(pa.array(kb == b)))
            names.append(f.name)
        for k, (_, p, fid, dead) in rows.items():
            truth[k] = None if dead else (p, fid)
    state = resolve_state(names, {}, lambda _t: True)
    probe = [f"k{i}" for i in range(600)]
    found = {r["key"]: (r["partition"], r["file_id"]) for r in lookup(storage, state, pa.array(probe), n).to_pylist()}
    assert found == {k: v for k, v in truth.items() if v is not None}
