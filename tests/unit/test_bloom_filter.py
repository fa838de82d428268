"""Bloom filters byte-identical to Apache Hudi's: the samples' footers, Hadoop reference vectors, edge cases.

The reference values below were computed once with Hadoop 3.5.0's own classes (the
``hadoop-client-api`` jar shipped in pyspark/jars): ``org.apache.hadoop.util.hash.MurmurHash``,
``org.apache.hadoop.util.bloom.BloomFilter`` (what Hudi's SimpleBloomFilter wraps) and
``DynamicBloomFilter`` (which Hudi's bounded one copies; it is the same below the bound),
serialised with ``DataOutputStream`` and ``java.util.Base64``.
"""

from __future__ import annotations

import base64
import random
import struct
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.columns import KEY_COL, OP_COL, PART_COL
from engine.constants import (
    FOOTER_BLOOM_FILTER,
    FOOTER_BLOOM_FILTER_TYPE,
    META_COLUMNS,
    RECORD_KEY_COL,
)
from engine.errors import CorruptTableError, InvalidInputError
from engine.index.bloom_filter import (
    DynamicBloomFilter,
    SimpleBloomFilter,
    bit_positions,
    bit_positions_batch,
    bit_size,
    bloom_filter_from_footer,
    build_for_keys,
    footer_entries,
    murmur_hash,
    num_hashes,
    parse_bloom_filter,
)
from engine.keygen.murmur import hash_chain, hash_chain_arrow
from engine.storage import storage_for
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket
from tests.support.samples import base_files, list_samples, sample_table

# (key, MurmurHash.hash(utf8(key), len, seed) for seed in _SEEDS), from Hadoop.
_SEEDS = (0, 1, -1, 123456789, -(2**31))
_MURMUR = [
    ("a", (-1838653602, 626045324, 713507990, 846967266, 1813357478)),
    ("ab", (1525573013, -419373624, -1797532438, 773214199, 882555261)),
    ("abc", (1775488903, -2144439693, -1465591341, 923286241, 1132436191)),
    ("abcd", (646393889, -918586858, 1555318719, -342526052, 3374409)),
    ("abcde", (1594468574, -825729666, -392878951, -1757765751, -2057560970)),
    ("abcdef", (-1641135381, 2141321803, 1479082514, 925879378, 2010878211)),
    ("abcdefg", (-14544559, 1451847678, -123323533, 1502659124, 628598265)),
    ("abcdefgh", (69371878, 1080400154, 2027089043, 1971358996, 712432462)),
    ("1", (1228156847, 1111412596, 886594861, 1484351806, 1871209175)),
    ("id:1,name:Alice", (71696166, 2011085419, 669643219, 1878094381, -571454386)),
    ("3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04", (1410745875, 705183409, 1307898771, 896736919, 2053774059)),
    # non-ASCII: the tail bytes are >= 0x80 and Java sign-extends them
    ("\u00e9", (-384040333, -913757653, -1125067414, 776216079, 259116715)),
    ("\u00e9\u00e9", (-1485701675, -456460066, 719671063, 1524669038, -842716995)),
    ("caf\u00e9", (-1650953116, -228453591, 327146757, 1880090307, -1007892340)),
    ("\u20ac", (-1486029997, 239383939, 672433944, 865564089, -843043317)),
    ("\u20ac\u20ac\u20ac", (-1207961150, -1799252227, 539021987, -1079343247, -1851017878)),
    ("\U0001f600", (-842402043, -962125668, -1030930139, -1467705340, -199392083)),
    ("x\u00ff\u00fe", (880491873, 1812440139, 386511313, -2023036818, 237455833)),
]

# (entries, fpp, bits, hashes) from Hudi's BloomFilterUtils formulas run in Java.
_SIZING = [
    (60000, 1e-9, 2587966, 30),
    (1000, 1e-3, 14378, 10),
    (100, 1e-2, 959, 7),
    (1, 0.5, 2, 2),
    (7, 0.1, 34, 4),
    (123457, 1e-6, 3550028, 20),
    (100000, 1e-9, 4313277, 30),
]

# Hadoop BloomFilter(959 bits, 7 hashes, murmur) holding "key-0" .. "key-99".
_SIMPLE_100 = (
    "/////wAAAAcBAAADv6oMJrGdnsA2n9DAF6XvQT2ca/k6+0ZNov0vuNmxjBG3EMCLFlexx9KeyHESQ+W22nAabB9328Oi"
    "Zfrcv7duVDYlNeeD+kBImodqsXra90Z4+ZwXxNRB6byNHDyNXlufPFMOTuD8yWHQ/OCc0cyCFtkoI+FQqf/FOw=="
)
# Hadoop DynamicBloomFilter(96 bits, 7 hashes, murmur, 10 per row) holding "k\u00e9y-0" .. "k\u00e9y-24":
# three rows, 5 keys in the active one.
_DYNAMIC_25 = (
    "/////wAAAAcBAAAAYAAAAAoAAAAFAAAAA/////8AAAAHAQAAAGB8Z7U3y5FCb/yL05X/////AAAABwEAAABglOs1aXJq"
    "LuZfSyXl/////wAAAAcBAAAAYEQAjBAQXhQENwUEFg=="
)
# Hadoop BloomFilter(30 bits, 2 hashes): a vector size that is not a multiple of 8.
_ODD_30 = "/////wAAAAIBAAAAHkhYCA0="


# --- hashing -------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), _MURMUR)
def test_murmur_hash_matches_hadoop(key: str, expected: tuple[int, ...]) -> None:
    data = key.encode("utf-8")
    assert tuple(murmur_hash(data, seed) for seed in _SEEDS) == expected


def test_batch_positions_equal_the_pure_ones() -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019-_:,\u00e9\u00ff\u20ac\U0001f600"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 41))) for _ in range(2000)]
    keys += [k for k, _ in _MURMUR]
    encoded = [k.encode("utf-8") for k in keys]
    for nb_hash, size in [(30, 2587966), (7, 959), (3, 8), (1, 2**31 - 1)]:
        batch = bit_positions_batch(encoded, nb_hash, size)
        assert batch.shape == (len(keys), nb_hash)
        assert batch.tolist() == [bit_positions(b, nb_hash, size) for b in encoded]


def test_arrow_chain_equals_the_bytes_chain() -> None:
    """`hash_chain_arrow` reads the keys from the Arrow buffers: same chain as from Python bytes,
    for sliced, chunked and large string arrays."""
    rng = random.Random(11)
    alphabet = "abcXYZ019-_:,\u00e9\u00ff\u20ac\U0001f600"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 41))) for _ in range(3000)]
    keys += [k for k, _ in _MURMUR]
    want = hash_chain([k.encode("utf-8") for k in keys], 9)
    arr = pa.array(keys, pa.string())
    assert hash_chain_arrow(arr, 9).tolist() == want.tolist()
    assert hash_chain_arrow(arr.slice(17, 1000), 9).tolist() == want[17:1017].tolist()
    chunked = pa.chunked_array([arr.slice(0, 5), arr.slice(5, 0), arr.slice(5)])
    assert hash_chain_arrow(chunked, 9).tolist() == want.tolist()
    assert hash_chain_arrow(arr.cast(pa.large_string()).slice(3), 9).tolist() == want[3:].tolist()
    assert hash_chain_arrow(pa.array([], pa.string()), 9).shape == (0, 9)
    # the bytes of the reference vectors, through the murmur of the Python port
    for key, expected in _MURMUR:
        assert hash_chain_arrow(pa.array([key]), 1)[0, 0] == abs(expected[0])


@pytest.mark.parametrize("bad, message", [(["a", None], "cannot be null"), (["a", ""], "cannot be empty")])
def test_arrow_chain_refuses_null_and_empty_keys(bad, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        hash_chain_arrow(pa.array(bad, pa.string()), 3)
    with pytest.raises(InvalidInputError, match=message):
        build_for_keys(pa.chunked_array([pa.array(bad, pa.string())]))


def test_filters_from_arrow_keys_are_byte_identical() -> None:
    """Past a DYNAMIC_V0 row (60,000 keys) and past its bound (100,000): the same filter whether
    the keys come as Python strings or as an Arrow array."""
    keys = [f"key-{i:07d}-{'x' * (i % 5)}" for i in range(130_000)]
    arr = pa.array(keys, pa.string())
    assert build_for_keys(arr).serialize() == build_for_keys(keys).serialize()
    small = SimpleBloomFilter.create(1000, 0.01)
    small.add_all(arr.slice(0, 500))
    reference = SimpleBloomFilter.create(1000, 0.01)
    reference.add_all(keys[:500])
    assert small.serialize() == reference.serialize()
    assert small.might_contain_many(keys[:500]) == [True] * 500


@pytest.mark.parametrize(("entries", "fpp", "bits", "hashes"), _SIZING)
def test_sizing_matches_hudi(entries: int, fpp: float, bits: int, hashes: int) -> None:
    assert bit_size(entries, fpp) == bits
    assert num_hashes(bits, entries) == hashes
    simple = SimpleBloomFilter.create(entries, fpp)
    assert (simple.vector_size, simple.num_hashes) == (bits, hashes)


def test_default_dynamic_filter_is_hudis_default() -> None:
    bloom = DynamicBloomFilter.create()
    assert (bloom.vector_size, bloom.num_hashes, bloom.entries_per_row, bloom.max_entries) == (
        2587966,
        30,
        60000,
        100000,
    )
    raw = base64.b64decode(bloom.serialize())
    assert struct.unpack_from(">iibi iii", raw) == (-1, 30, 1, 2587966, 60000, 0, 1)
    assert len(raw) == 13 + 12 + 13 + (2587966 + 7) // 8


# --- byte identity with Hadoop's classes -----------------------------------------------------


def test_simple_filter_matches_hadoop_bytes() -> None:
    keys = [f"key-{i}" for i in range(100)]
    bulk = SimpleBloomFilter.create(100, 1e-2)
    bulk.add_all(keys)
    one_by_one = SimpleBloomFilter.create(100, 1e-2)
    for key in keys:
        one_by_one.add(key)
    assert bulk.serialize() == _SIMPLE_100
    assert one_by_one.serialize() == _SIMPLE_100


def test_odd_vector_size_matches_hadoop_bytes() -> None:
    bloom = SimpleBloomFilter(30, 2)
    bloom.add_all([f"o{i}" for i in range(5)])
    assert bloom.serialize() == _ODD_30
    assert len(base64.b64decode(_ODD_30)) == 13 + 4  # ceil(30 / 8) bytes of bits


def test_dynamic_filter_with_several_rows_matches_hadoop_bytes() -> None:
    keys = [f"k\u00e9y-{i}" for i in range(25)]
    bulk = DynamicBloomFilter.create(10, 1e-2, max_entries=1_000_000)
    bulk.add_all(keys)
    one_by_one = DynamicBloomFilter.create(10, 1e-2, max_entries=1_000_000)
    for key in keys:
        one_by_one.add(key)
    assert (bulk.num_rows, bulk.current_count) == (3, 5)
    assert bulk.serialize() == _DYNAMIC_25
    assert one_by_one.serialize() == _DYNAMIC_25


def test_key_order_matters_only_across_rows() -> None:
    keys = [f"k\u00e9y-{i}" for i in range(25)]
    within_rows = DynamicBloomFilter.create(10, 1e-2, max_entries=1_000_000)
    within_rows.add_all(keys[:10][::-1] + keys[10:20][::-1] + keys[20:][::-1])
    across_rows = DynamicBloomFilter.create(10, 1e-2, max_entries=1_000_000)
    across_rows.add_all(keys[::-1])
    assert within_rows.serialize() == _DYNAMIC_25
    assert across_rows.serialize() != _DYNAMIC_25


# --- the samples: every base file's footer, rebuilt from its keys -----------------------------


@pytest.mark.parametrize("name", list_samples())
def test_sample_footers_are_rebuilt_byte_for_byte(name: str, tmp_path: Path) -> None:
    table = sample_table(name, tmp_path)
    files = base_files(table)
    if name == "cow_v6_empty":
        assert files == []
        return
    assert files, f"{name} has no base files"
    for path in files:
        footer = pq.read_metadata(path).metadata
        stored = footer[FOOTER_BLOOM_FILTER.encode()].decode("ascii")
        type_code = footer[FOOTER_BLOOM_FILTER_TYPE.encode()].decode("ascii")
        keys = pq.read_table(path, columns=[RECORD_KEY_COL]).column(0).to_pylist()
        assert type_code == "DYNAMIC_V0"

        # Hudi's defaults, keys in file order (the order Hudi wrote, and so added, them)
        rebuilt = build_for_keys(keys)
        assert rebuilt.serialize() == stored, path.name
        assert footer_entries(rebuilt) == {
            FOOTER_BLOOM_FILTER: stored.encode("ascii"),
            FOOTER_BLOOM_FILTER_TYPE: b"DYNAMIC_V0",
        }

        read = bloom_filter_from_footer(footer)
        assert isinstance(read, DynamicBloomFilter)
        assert read.serialize() == stored
        assert read.current_count == len(keys) and read.num_rows == 1
        assert all(read.might_contain(k) for k in keys)
        assert read.might_contain_many(keys) == [True] * len(keys)
        assert read.might_contain_many([f"absent-{k}" for k in keys]) == [False] * len(keys)


# --- round trips, footers, behaviour ---------------------------------------------------------


@pytest.mark.parametrize("text", [_SIMPLE_100, _ODD_30])
def test_simple_round_trip(text: str) -> None:
    assert SimpleBloomFilter.deserialize(text).serialize() == text
    assert parse_bloom_filter(text).serialize() == text


def test_dynamic_round_trip() -> None:
    bloom = DynamicBloomFilter.deserialize(_DYNAMIC_25)
    assert (bloom.num_rows, bloom.entries_per_row, bloom.current_count) == (3, 10, 5)
    assert bloom.serialize() == _DYNAMIC_25
    assert parse_bloom_filter(_DYNAMIC_25, "DYNAMIC_V0").serialize() == _DYNAMIC_25
    assert all(bloom.might_contain(f"k\u00e9y-{i}") for i in range(25))


def test_footer_type_code_defaults_to_simple() -> None:
    assert isinstance(bloom_filter_from_footer({FOOTER_BLOOM_FILTER: _SIMPLE_100}), SimpleBloomFilter)
    as_bytes = {
        FOOTER_BLOOM_FILTER.encode(): _DYNAMIC_25.encode(),
        FOOTER_BLOOM_FILTER_TYPE.encode(): b"DYNAMIC_V0",
    }
    assert bloom_filter_from_footer(as_bytes).serialize() == _DYNAMIC_25  # type: ignore[union-attr]
    old_key = bloom_filter_from_footer({"com.uber.hoodie.bloomfilter": _SIMPLE_100})
    assert old_key is not None and old_key.serialize() == _SIMPLE_100
    assert bloom_filter_from_footer({"hoodie_min_record_key": "a"}) is None
    assert bloom_filter_from_footer(None) is None
    with pytest.raises(CorruptTableError):
        bloom_filter_from_footer({FOOTER_BLOOM_FILTER: _SIMPLE_100, FOOTER_BLOOM_FILTER_TYPE: "DYNAMIC_V9"})


def test_false_positive_rate_is_near_the_target() -> None:
    bloom = SimpleBloomFilter.create(1000, 1e-3)
    present = [f"present-{i}" for i in range(1000)]
    bloom.add_all(present)
    assert bloom.might_contain_many(present) == [True] * 1000
    hits = sum(bloom.might_contain_many([f"absent-{i}" for i in range(20_000)]))
    assert 1e-3 / 3 <= hits / 20_000 <= 1e-3 * 3, hits


def test_tiny_filter_gives_a_false_positive() -> None:
    bloom = SimpleBloomFilter(8, 1)
    added = ["a", "b", "c"]
    bloom.add_all(added)
    set_bits = {abs(murmur_hash(k.encode(), 0)) % 8 for k in added}
    absent = next(
        k for k in (f"absent-{i}" for i in range(100)) if abs(murmur_hash(k.encode(), 0)) % 8 in set_bits
    )
    assert absent not in added
    assert bloom.might_contain(absent) is True
    unset = next(
        k for k in (f"absent-{i}" for i in range(100)) if abs(murmur_hash(k.encode(), 0)) % 8 not in set_bits
    )
    assert bloom.might_contain(unset) is False
    raw = base64.b64decode(bloom.serialize())
    assert raw[13] == sum(1 << b for b in set_bits)


def test_bounded_dynamic_filter_spreads_keys_over_rows_past_the_bound() -> None:
    # 10 per row, bound 25: rows are added while rows * 10 < 25, so at most 3; then key 31 goes to
    # row 0 (reachedMax) and later keys round-robin from row 0: 0, 1, 2, 0, ...
    keys = [f"b{i}" for i in range(36)]
    bulk = DynamicBloomFilter.create(10, 1e-2, max_entries=25)
    bulk.add_all(keys)
    one_by_one = DynamicBloomFilter.create(10, 1e-2, max_entries=25)
    for key in keys:
        one_by_one.add(key)
    split = DynamicBloomFilter.create(10, 1e-2, max_entries=25)
    for chunk in (keys[:7], keys[7:31], keys[31:33], keys[33:]):
        split.add_all(chunk)

    expected_rows: list[list[str]] = [keys[0:10], keys[10:20], keys[20:30]]
    for i, row in enumerate([0, 0, 1, 2, 0, 1]):
        expected_rows[row].append(keys[30 + i])
    rows = []
    for members in expected_rows:
        simple = SimpleBloomFilter.create(10, 1e-2)
        simple.add_all(members)
        rows.append(base64.b64decode(simple.serialize()))
    # the count restarts at each new row and keeps counting past the bound: 10 + 6
    header = struct.pack(">iibi iii", -1, 7, 1, 96, 10, 16, 3)
    expected = base64.b64encode(header + b"".join(rows)).decode()
    assert bulk.serialize() == expected
    assert one_by_one.serialize() == expected
    assert split.serialize() == expected
    assert all(bulk.might_contain(k) for k in keys)


def test_hudi_defaults_hold_two_rows_at_most() -> None:
    keys = [str(i) for i in range(130_000)]
    bloom = build_for_keys(keys)
    # rows 1 and 2 fill up to 120,000; then 2 * 60,000 >= 100,000 stops the growth
    assert (bloom.num_rows, bloom.current_count) == (2, 130_000 - 60_000)
    assert bloom.might_contain_many(keys[::997]) == [True] * len(keys[::997])


def test_deserialised_dynamic_filter_has_no_bound_as_in_java() -> None:
    # Java does not serialise maxNr, so a read filter whose active row is full never grows
    bloom = DynamicBloomFilter.create(10, 1e-2, max_entries=1_000)
    bloom.add_all([f"r{i}" for i in range(10)])
    read = DynamicBloomFilter.deserialize(bloom.serialize())
    read.add("extra")
    assert read.num_rows == 1 and read.current_count == 11
    bloom.add("extra")
    assert bloom.num_rows == 2


def test_invalid_keys_and_texts_are_rejected() -> None:
    bloom = DynamicBloomFilter.create(10, 1e-2)
    with pytest.raises(InvalidInputError):
        bloom.add("")
    with pytest.raises(InvalidInputError):
        bloom.add_all(["ok", ""])
    assert bloom.current_count == 0  # nothing was added by the failed calls
    with pytest.raises(InvalidInputError):
        SimpleBloomFilter.create(0, 1e-3)
    with pytest.raises(InvalidInputError):
        SimpleBloomFilter.create(10, 1.5)
    with pytest.raises(CorruptTableError):
        SimpleBloomFilter.deserialize("not base64!")
    with pytest.raises(CorruptTableError):
        SimpleBloomFilter.deserialize(_SIMPLE_100[:40])
    with pytest.raises(CorruptTableError):
        DynamicBloomFilter.deserialize(_DYNAMIC_25[:-20])
    with pytest.raises(CorruptTableError):
        SimpleBloomFilter.deserialize(base64.b64encode(struct.pack(">iibi", -2, 1, 1, 8) + b"\0").decode())


def test_old_unversioned_header_reads_as_jenkins() -> None:
    # before the version field, the first int was the hash count and the hash was Jenkins
    old = base64.b64encode(struct.pack(">ii", 3, 16) + b"\x01\x80").decode()
    bloom = SimpleBloomFilter.deserialize(old)
    assert (bloom.vector_size, bloom.num_hashes) == (16, 3)
    assert base64.b64decode(bloom.serialize()) == struct.pack(">iibi", -1, 3, 0, 16) + b"\x01\x80"
    with pytest.raises(InvalidInputError):
        bloom.might_contain("x")


def test_hundred_thousand_keys_take_under_a_few_seconds() -> None:
    keys = [f"{i:08d}-{i * 7919 % 100_003:06d}-record" for i in range(100_000)]
    start = time.perf_counter()
    text = build_for_keys(keys).serialize()
    elapsed = time.perf_counter() - start
    assert len(base64.b64decode(text)) == 25 + 2 * (13 + (2587966 + 7) // 8)
    assert elapsed < 5.0, elapsed  # about 0.2 s here; a pure-Python loop would take a minute


# --- wiring: base files written by the engine carry the filter --------------------------------


def test_written_base_file_carries_the_filter_of_its_keys(tmp_path: Path) -> None:
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + [pa.field("v", pa.int64())])
    ctx = WriteContext(
        storage=storage_for(str(tmp_path)), instant="20240101000000000", schema=schema, precombine_field=None
    )
    incoming = pa.table(
        {
            KEY_COL: ["k3", "k1", "k\u00e9", "k2"],
            PART_COL: ["p"] * 4,
            OP_COL: ["U"] * 4,
            "v": [3, 1, 9, 2],
        }
    )
    outcome = write_bucket(ctx, BucketWrite("p", "f1-0", None, None), incoming, "0-1-2", 0)

    path = tmp_path / outcome.path
    footer = pq.read_metadata(path).metadata
    keys = pq.read_table(path, columns=[RECORD_KEY_COL]).column(0).to_pylist()
    assert keys == ["k1", "k2", "k3", "k\u00e9"]
    assert footer[FOOTER_BLOOM_FILTER_TYPE.encode()] == b"DYNAMIC_V0"
    assert footer[FOOTER_BLOOM_FILTER.encode()].decode() == build_for_keys(keys).serialize()
    read = bloom_filter_from_footer(footer)
    assert read is not None and read.might_contain_many(keys + ["k4"]) == [True, True, True, True, False]


def test_global_lookup_on_the_driver_finds_keys_in_every_partition(tmp_path: Path) -> None:
    """Issue 33.5: the driver's eager hashing cached the any-partition keys of a global lookup
    under ANY_PARTITION, then asked for them by each file's partition (KeyError: ('lima', 30))."""
    from engine.data.keys import ANY_PARTITION, ScanFile
    from engine.index.key_lookup import locate_on_driver

    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + [pa.field("v", pa.int64())])
    storage = storage_for(str(tmp_path))
    ctx = WriteContext(storage=storage, instant="20240101000000000", schema=schema, precombine_field=None)
    files = []
    for partition, keys in (("lima", ["a", "b"]), ("quito", ["c"]), ("cusco", ["d", "e"])):
        incoming = pa.table({KEY_COL: keys, PART_COL: [partition] * len(keys), OP_COL: ["U"] * len(keys),
                             "v": list(range(len(keys)))})
        outcome = write_bucket(ctx, BucketWrite(partition, f"{partition}-0", None, None), incoming, "0-1-2", 0)
        files.append(ScanFile(outcome.path, partition, f"{partition}-0"))
    wanted = {ANY_PARTITION: pa.array(["e", "a", "zz", "c"], pa.string())}
    for threads in (1, 3):
        found, stats = locate_on_driver(storage, files, wanted, None, threads)
        rows = sorted(zip(*(found.column(i).to_pylist() for i in range(3)), strict=True))
        assert rows == [("a", "lima", "lima-0"), ("c", "quito", "quito-0"), ("e", "cusco", "cusco-0")]
        assert stats["files"] == 3 and stats["files_read"] + stats["bloom_pruned"] + stats["range_pruned"] == 3


def test_add_all_in_slices_equals_one_pass_and_add_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys are hashed and added slice by slice (bounded memory for files of millions of keys): the
    filter is byte for byte what one pass and `add` key by key give, across row changes and past
    the dynamic filter's bound (keys then spread over the rows round-robin)."""
    import engine.data.bloom_filter as bf

    keys = [f"key-{i:05d}" for i in range(2_500)]

    def built(step: int, arrow: bool) -> str:
        monkeypatch.setattr(bf, "KEYS_PER_STEP", step)
        dynamic = DynamicBloomFilter.create(num_entries=400, fpp=0.01, max_entries=1_000)
        dynamic.add_all(pa.array(keys) if arrow else iter(keys))
        simple = SimpleBloomFilter.create(num_entries=400, fpp=0.01)
        simple.add_all(pa.array(keys) if arrow else iter(keys))
        return dynamic.serialize() + "|" + simple.serialize()

    one_pass = built(10**9, True)
    assert built(7, True) == one_pass and built(333, False) == one_pass
    one_by_one = DynamicBloomFilter.create(num_entries=400, fpp=0.01, max_entries=1_000)
    simple = SimpleBloomFilter.create(num_entries=400, fpp=0.01)
    for k in keys:
        one_by_one.add(k)
        simple.add(k)
    assert one_by_one.num_rows == 3 and one_pass == one_by_one.serialize() + "|" + simple.serialize()
